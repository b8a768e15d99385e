"""axe-core in the four views of a page: the light and the dark scheme, at a desktop and a
phone width (tests/browser/test_accessibility.py and the explorer's own-text test use it).

Colour contrast is most of axe's time, and a colour does not depend on the width unless a
style says so: at the phone width the colour rules audit the text whose look (colours, font,
visibility, or an ancestor's) differs from the desktop view, which is every element that a
width-dependent style or the phone layout touches; every other rule audits the whole page in
every view.
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

# What decides how an element's text looks: if none of this changed for an element and its
# ancestors between two views, its colour contrast did not change either. REMEMBER keeps each
# element's look in the first view; CONTRAST_OF_CHANGED runs the colour rules on the elements
# whose look, or an ancestor's, is different now (document order: a parent comes first).
LOOK = """e => { const s = getComputedStyle(e);
    return [e.checkVisibility({opacityProperty: true, visibilityProperty: true}), s.color,
            s.backgroundColor, s.backgroundImage, s.opacity, s.fontSize, s.fontWeight,
            s.textShadow, s.filter, s.mixBlendMode].join('|'); }"""
REMEMBER = f"""scheme => {{ const look = {LOOK};
    (window.__qkvLooks ??= {{}})[scheme] = new Map([...document.querySelectorAll('body *')]
        .map(e => [e, look(e)])); }}"""
CONTRAST_OF_CHANGED = f"""([scheme, options]) => {{ const look = {LOOK};
    const before = window.__qkvLooks[scheme], changed = new Set();
    for (const e of document.querySelectorAll('body *')) {{
        if (changed.has(e.parentElement) || before.get(e) !== look(e)) changed.add(e);
    }}
    if (changed.size === 0) return [];
    return axe.run({{include: [...changed]}}, options).then(r => r.violations); }}"""


def settle(page) -> None:
    """Wait two frames and every running transition: Material's scripts react to resizes, and
    its colours fade over a few frames after a scheme change (axe would read a mid-fade colour)."""
    page.evaluate("""() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))
        .then(() => Promise.all(document.getAnimations()
            .filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity)
            .map(a => a.finished.catch(() => null))))""")


def axe_violations(page, colour_rules: bool = True) -> list[dict]:
    options = AXE_OPTIONS
    if not colour_rules:
        options = {**AXE_OPTIONS, "rules": {rule: {"enabled": False} for rule in COLOUR_RULES}}
    return page.evaluate("options => axe.run(document, options).then(r => r.violations)", options)


def view_violations(page, width: int, scheme: str) -> list[dict]:
    """axe's findings in one view: every rule at the first width; at the others, every rule
    but the colour rules, and those on the elements whose look differs from the first width."""
    if width == WIDTHS[0]:
        page.evaluate(REMEMBER, scheme)
        return axe_violations(page)
    colour_only = {**AXE_OPTIONS, "runOnly": {"type": "rule", "values": list(COLOUR_RULES)}}
    return axe_violations(page, colour_rules=False) + page.evaluate(
        CONTRAST_OF_CHANGED, [scheme, colour_only]
    )


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
