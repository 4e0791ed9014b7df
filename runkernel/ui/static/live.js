// Live updates without a reload: every few seconds the page is fetched again and its
// <main> replaced when it changed, unless the operator is typing in one of its forms.
// Bounded: at most MAX_POLLS polls, none while the tab is hidden, and it stops on an error.
(function () {
  "use strict";
  var INTERVAL_MS = 2000;
  var MAX_POLLS = 900; // 30 minutes at 2 s; a reload starts again
  var polls = 0;
  var status = document.getElementById("live-status");
  function busy(main) {
    var active = document.activeElement;
    if (active && main.contains(active) && (active.tagName === "INPUT" || active.tagName === "SELECT")) { return true; }
    var fields = main.querySelectorAll("input:not([type=hidden])");
    for (var i = 0; i < fields.length; i++) { if (fields[i].value) { return true; } }
    return false;
  }
  function tell(text) { if (status) { status.textContent = text; } }
  function poll() {
    if (polls >= MAX_POLLS) { tell("live updates paused: reload to resume"); return; }
    if (document.hidden) { setTimeout(poll, INTERVAL_MS); return; }
    polls += 1;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Runkernel-Live": "1" } })
      .then(function (answer) { if (!answer.ok) { throw new Error(String(answer.status)); } return answer.text(); })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("live");
        var main = document.getElementById("live");
        if (fresh && main && fresh.innerHTML !== main.innerHTML && !busy(main)) {
          main.innerHTML = fresh.innerHTML;
        }
        tell("live");
        setTimeout(poll, INTERVAL_MS);
      })
      .catch(function (error) { tell("live updates stopped (" + error.message + "): reload to resume"); });
  }
  setTimeout(poll, INTERVAL_MS);
})();
