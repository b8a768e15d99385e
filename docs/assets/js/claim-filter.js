/* "How we know": the filter above the claims (qkv_site.claims writes the field).
 *
 * Typing keeps the table rows whose text (the claim's sentence or its tests' names)
 * holds every word typed, case ignored, and hides a chapter's heading and table when
 * none of its rows is left. The count says how many claims are shown. Runs on the page
 * that has the field, including when Material's instant navigation brings it in.
 */
(function () {
  "use strict";

  function words(text) {
    return text.toLowerCase().split(/\s+/).filter(Boolean);
  }

  function apply(field) {
    var wanted = words(field.value);
    var article = field.closest("article") || document;
    var rows = article.querySelectorAll("table tbody tr");
    var shown = 0;
    Array.prototype.forEach.call(rows, function (row) {
      var text = row.textContent.toLowerCase();
      var keep = wanted.every(function (w) { return text.indexOf(w) !== -1; });
      row.hidden = !keep;
      if (keep) shown += 1;
    });
    // a table (and its heading) with no row left goes; a chapter heading whose tables all
    // went goes too
    var headings = article.querySelectorAll("h2, h3");
    Array.prototype.forEach.call(headings, function (heading) {
      var visible = false, el = heading.nextElementSibling;
      while (el && !/^H[23]$/.test(el.tagName)) {
        var table = el.matches("table") ? el : el.querySelector("table");
        if (table) {
          var tableVisible = table.querySelector("tbody tr:not([hidden])") !== null;
          el.hidden = !tableVisible;
          visible = visible || tableVisible;
        }
        el = el.nextElementSibling;
      }
      if (heading.tagName === "H3") heading.hidden = !visible;
      else heading.dataset.claimsShown = visible ? "yes" : "no";
    });
    Array.prototype.forEach.call(article.querySelectorAll("h2"), function (h2) {
      var any = h2.dataset.claimsShown === "yes", el = h2.nextElementSibling;
      while (el && el.tagName !== "H2") {
        if (el.tagName === "H3" && !el.hidden) any = true;
        el = el.nextElementSibling;
      }
      h2.hidden = !any;
    });
    var count = document.getElementById("claim-filter-count");
    if (count) count.textContent = shown + " of " + rows.length + " claims shown";
  }

  function start() {
    var field = document.getElementById("claim-filter-input");
    if (!field || field.dataset.ready) return;
    field.dataset.ready = "yes";
    field.addEventListener("input", function () { apply(field); });
    apply(field);
  }

  if (window.document$ && typeof window.document$.subscribe === "function") {
    window.document$.subscribe(start);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
