// What the reader's pages need beyond the theme. Served with the book (no CDN).
//
// 1. Navigation on phones and tablets. pydata-sphinx-theme (and sphinx-book-theme's wide-screen
//    fix) attach their handlers to the FIRST .primary-toggle / .secondary-toggle of the page,
//    a header button that sphinx-book-theme hides; the buttons the reader sees did nothing.
//    Each visible toggle forwards its click to that first one.
// 2. Display equations that are wider than the text: shrunk to fit (down to 70%); one still
//    too wide scrolls inside its own box with a scroll bar that is always shown (math-scroll).
(function () {
  function forwardToggles(selector) {
    var all = Array.prototype.slice.call(document.querySelectorAll(selector));
    if (all.length < 2) { return; }
    var handled = all[0];
    all.slice(1).forEach(function (button) {
      button.addEventListener("click", function (event) {
        event.preventDefault();
        event.stopPropagation();
        handled.click();
      });
    });
  }

  var MIN_SCALE = 0.7;
  function fitEquations() {
    document.querySelectorAll('main mjx-container[display="true"]').forEach(function (m) {
      m.style.fontSize = "";
      m.classList.remove("math-scroll", "math-shrunk");
      var box = m.clientWidth, content = m.scrollWidth;
      if (box <= 0 || content <= box + 1) { return; }
      var scale = Math.max(MIN_SCALE, Math.floor((box / content) * 98) / 100);
      m.style.fontSize = Math.round(scale * 100) + "%";
      m.classList.add("math-shrunk");
      if (m.scrollWidth > m.clientWidth + 1) { m.classList.add("math-scroll"); }
    });
  }

  function whenMathReady(fn) {
    if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
      window.MathJax.startup.promise.then(fn);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    forwardToggles(".primary-toggle");
    forwardToggles(".secondary-toggle");
  });
  window.addEventListener("load", function () {
    whenMathReady(fitEquations);
    var timer = null;
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(fitEquations, 150);
    });
  });
})();
