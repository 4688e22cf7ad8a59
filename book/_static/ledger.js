// The claims ledger's filter: by words (all must occur), verdict and kind. Served with the book (no CDN).
(function () {
  function apply() {
    var q = (document.getElementById("ledger-q") || {}).value || "";
    var verdict = (document.getElementById("ledger-verdict") || {}).value || "";
    var kind = (document.getElementById("ledger-kind") || {}).value || "";
    // every word must occur (in any order), not the whole query as one substring
    var words = q.trim().toLowerCase().split(/\s+/).filter(function (w) { return w !== ""; });
    q = words.join(" ");
    var active = q !== "" || verdict !== "" || kind !== "";
    var shown = 0, total = 0;
    document.querySelectorAll("details.ledger-chapter").forEach(function (sec) {
      var visible = 0;
      sec.querySelectorAll("tbody tr").forEach(function (tr) {
        total += 1;
        var text = tr.dataset.search;
        var ok = words.every(function (w) { return text.indexOf(w) >= 0; }) &&
          (!verdict || tr.dataset.verdict === verdict) &&
          (!kind || tr.dataset.kind === kind);
        tr.hidden = !ok;
        if (ok) { visible += 1; }
      });
      shown += visible;
      sec.hidden = active && visible === 0;
      if (active && visible > 0) { sec.open = true; }
    });
    var count = document.getElementById("ledger-count");
    if (count) { count.textContent = active ? shown + " of " + total + " claims" : total + " claims"; }
  }
  document.addEventListener("DOMContentLoaded", function () {
    ["ledger-q", "ledger-verdict", "ledger-kind"].forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { el.addEventListener("input", apply); el.addEventListener("change", apply); }
    });
    apply();
  });
})();
