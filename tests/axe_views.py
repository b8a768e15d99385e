"""axe-core in the four views of a page: the light and the dark scheme, at a desktop and a
phone width (tests/browser/test_accessibility.py and the explorer's own-text test use it).

Colour contrast is most of axe's time (85 % on our pages), so the colour rules are run
where a verdict can differ. An element's contrast follows from its colours, its font and
its ancestors' backgrounds (its "look chain"): the colour rules judge one element with text
per distinct look chain in a view (one cell stands for a table's identical cells, one token
for a code block's tokens of its kind). A colour does not depend on the width unless a style
says so: at the phone width they judge the elements whose look, or an ancestor's, differs
from the desktop view. Every other rule audits the whole page in every view.
"""

from __future__ import annotations

import importlib.resources

AXE_JS = importlib.resources.files("axe_playwright_python") / "axe.min.js"
AXE_OPTIONS = {
    "runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]},
    "resultTypes": ["violations"],  # skip collecting passes: about twice as fast
}
SCHEMES = ("default", "slate")  # Material's light and dark palettes
WIDTHS = (1280, 390)
COLOUR_RULES = ("color-contrast", "link-in-text-block")  # what they judge is colour

# The colour rules judge an element's text by its colours and font and by its ancestors'
# backgrounds. COLOUR_AUDIT gives every element a look (LOOK) and a look chain (its own look
# after its parent's chain), and runs the colour rules on one element with text per distinct
# chain: elements that share a chain share their verdict (a table's cells, a code block's
# tokens of one kind). With ``remember`` it keeps the looks of this view; otherwise it audits
# only the elements whose look, or an ancestor's, differs from the remembered view.
LOOK = """e => { const s = getComputedStyle(e);
    return [e.checkVisibility({opacityProperty: true, visibilityProperty: true}), s.color,
            s.backgroundColor, s.backgroundImage, s.opacity, s.fontSize, s.fontWeight,
            s.textShadow, s.filter, s.mixBlendMode].join('|'); }"""
COLOUR_AUDIT = f"""([scheme, remember, options]) => {{
    const look = {LOOK}, looks = new Map(), chains = new Map(), ids = new Map();
    const seen = (window.__qkvLooks ??= {{}});
    const changed = new Set(), candidates = new Map();
    for (const e of document.querySelectorAll('body *')) {{  // a parent comes first
        looks.set(e, look(e));
        const key = (chains.get(e.parentElement) ?? 'body') + '>' + looks.get(e);
        if (!ids.has(key)) ids.set(key, ids.size);
        chains.set(e, ids.get(key));
        if (!remember && (changed.has(e.parentElement) || seen[scheme].get(e) !== looks.get(e))) {{
            changed.add(e);
        }}
        if (!remember && !changed.has(e)) continue;
        const text = [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('');
        if (!text.trim()) continue;
        const kind = chains.get(e) + (/[\\p{{L}}\\p{{N}}]/u.test(text) ? 'w' : 's');
        if (!candidates.has(kind)) candidates.set(kind, e);
    }}
    if (remember) seen[scheme] = looks;
    if (candidates.size === 0) return [];
    return axe.run({{include: [...candidates.values()]}}, options).then(r => r.violations); }}"""


def settle(page) -> None:
    """Wait two frames and every running transition: Material's scripts react to resizes, and
    its colours fade over a few frames after a scheme change (axe would read a mid-fade colour)."""
    page.evaluate("""() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))
        .then(() => Promise.all(document.getAnimations()
            .filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity)
            .map(a => a.finished.catch(() => null))))""")


def view_violations(page, width: int, scheme: str) -> list[dict]:
    """axe's findings in one view: every rule but the colour rules on the whole page, and the
    colour rules on one element per look chain (at the phone width, of the elements whose
    look differs from the desktop view's)."""
    others = {**AXE_OPTIONS, "rules": {rule: {"enabled": False} for rule in COLOUR_RULES}}
    colour = {**AXE_OPTIONS, "runOnly": {"type": "rule", "values": list(COLOUR_RULES)}}
    found = page.evaluate("options => axe.run(document, options).then(r => r.violations)", others)
    return found + page.evaluate(COLOUR_AUDIT, [scheme, width == WIDTHS[0], colour])


def audit_views(page) -> list[tuple[str, str, str, str]]:
    """(view, rule, element, html) for every node axe flags on the open page in each view."""
    found = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for scheme in SCHEMES:
            page.evaluate("s => document.body.setAttribute('data-md-color-scheme', s)", scheme)
            settle(page)
            view = f"{scheme} {width}px"
            for rule in view_violations(page, width, scheme):
                for node in rule["nodes"]:
                    found.append((view, rule["id"], " > ".join(map(str, node["target"])), node["html"][:160]))
    return found
