/* Accessibility touches that need the rendered page (templates cannot do them).
 *
 * - Material draws a <nav class="md-code__nav"> with the copy button into every code block
 *   after the page loads. Unnamed, each repeats the same landmark; each gets a name here
 *   ("Code block 3: tie_qk.py"), which also lets screen-reader users jump between blocks.
 * - On narrow screens the closed search field, off screen, leaves the tab order.
 * - Wide code, tables and maths scroll sideways inside their own box. A keyboard can scroll
 *   a box only once it can focus it, so every such box that actually overflows gets
 *   tabindex="0" (and loses it again when the window grows and it fits).
 *
 * Runs on every page Material shows, including pages reached by instant navigation, and
 * again whenever the page's content changes size.
 */
(function () {
  "use strict";

  var SCROLLERS = [
    ".md-typeset pre > code",
    ".md-typeset__scrollwrap",
    ".md-typeset .arithmatex > math",
    ".md-typeset .highlight-ipynb",
    ".md-typeset .jp-OutputArea-output pre",
    ".qkv-explorer .qx-formula",
    ".md-typeset .qkv-data-wrap",
  ].join(",");

  function nameCodeNavs(root) {
    var navs = root.querySelectorAll("nav.md-code__nav");
    Array.prototype.forEach.call(navs, function (nav, i) {
      var block = nav.closest(".highlight");
      var title = block && block.querySelector(".filename");
      var name = "Code block " + (i + 1) + (title ? ": " + title.textContent.trim() : "");
      if (nav.getAttribute("aria-label") !== name) nav.setAttribute("aria-label", name);
    });
  }

  /* Whether a keyboard would need to scroll el: it overflows (by any amount, as axe-core
     judges it) along an axis whose overflow style lets it scroll. */
  function scrolls(el) {
    var style = window.getComputedStyle(el), free = /auto|scroll/;
    return (free.test(style.overflowX) && el.scrollWidth > el.clientWidth) ||
           (free.test(style.overflowY) && el.scrollHeight > el.clientHeight);
  }

  function focusScrollers(root) {
    Array.prototype.forEach.call(root.querySelectorAll(SCROLLERS), function (el) {
      var scrollable = scrolls(el);
      if (scrollable && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("data-qkv-scroll", "");
      } else if (!scrollable && el.hasAttribute("data-qkv-scroll")) {
        el.removeAttribute("tabindex");
        el.removeAttribute("data-qkv-scroll");
      }
    });
  }

  /* On narrow screens Material keeps the closed search field off screen but in the tab
     order; it still focuses the field itself when search opens (icon, "s" or "/"). */
  var NARROW_SEARCH = window.matchMedia("(max-width: 59.984375em)");
  function searchField() {
    var field = document.querySelector(".md-search__input");
    if (!field) return;
    if (NARROW_SEARCH.matches) field.setAttribute("tabindex", "-1");
    else field.removeAttribute("tabindex");
  }

  var pending = false;
  function update() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () {
      pending = false;
      nameCodeNavs(document);
      focusScrollers(document);
      searchField();
    });
  }

  // Content that Material or the explorer adds later, and every change of width.
  new MutationObserver(update).observe(document.body, { childList: true, subtree: true });
  window.addEventListener("resize", update);
  if (window.document$ && typeof window.document$.subscribe === "function") {
    window.document$.subscribe(update);
  } else {
    update();
  }
})();
