// tokenbench console: times in the viewer's zone, live fragments by polling, and a
// scenario file read into the submit form. No inline script anywhere (the CSP forbids it).
"use strict";
(function () {
  var POLL_MS = 2000;
  var ACTIVE = ["running", "queued", "deciding"];

  function localTimes(root) {
    var nodes = (root || document).querySelectorAll("time[datetime]");
    for (var i = 0; i < nodes.length; i++) {
      var node = nodes[i];
      var value = node.getAttribute("datetime");
      if (!value) continue;
      var when = new Date(value);
      if (isNaN(when.getTime())) continue;
      node.textContent = when.toLocaleString(undefined, {
        year: "numeric", month: "short", day: "numeric",
        hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"
      });
      node.title = when.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
    }
  }

  function csrfToken() {
    var field = document.querySelector("input[name=csrf]");
    return field ? field.value : "";
  }

  // Fetch a fragment and swap the element of the same id; a run that ended reloads the
  // page so that its report shows.
  function poll(holder) {
    var url = holder.getAttribute("data-poll");
    var targetId = holder.getAttribute("data-poll-target");
    if (url === "/runs/table") url += window.location.search;
    window.setTimeout(function tick() {
      fetch(url, { credentials: "same-origin", headers: { "X-CSRF-Token": csrfToken() } })
        .then(function (response) {
          if (response.redirected || response.status === 401) { window.location.assign("/login"); return null; }
          return response.ok ? response.text() : null;
        })
        .then(function (html) {
          if (html === null) { window.setTimeout(tick, POLL_MS * 2); return; }
          // A bare <tbody> outside a <table> is dropped by the HTML parser: parse it inside one.
          var wrapped = targetId === "runs-body" ? "<table>" + html + "</table>" : html;
          var doc = new DOMParser().parseFromString(wrapped, "text/html");
          var fresh = doc.getElementById(targetId);
          var old = document.getElementById(targetId);
          if (!fresh || !old) return;
          if (targetId === "progress") {
            var state = fresh.getAttribute("data-state");
            if (ACTIVE.indexOf(state) < 0) { window.location.reload(); return; }
          }
          old.replaceWith(document.importNode(fresh, true));
          localTimes(document.getElementById(targetId));
          if (targetId === "runs-body") {
            var empty = document.getElementById("runs-empty");
            if (empty) empty.hidden = fresh.querySelector("tr") !== null;
          }
          window.setTimeout(tick, POLL_MS);
        })
        .catch(function () { window.setTimeout(tick, POLL_MS * 2); });
    }, POLL_MS);
  }

  function scenarioFile() {
    var input = document.getElementById("scenario-file");
    var text = document.getElementById("scenario-text");
    if (!input || !text) return;
    input.addEventListener("change", function () {
      var file = input.files && input.files[0];
      if (!file) return;
      file.text().then(function (content) { text.value = content; text.focus(); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    var holders = document.querySelectorAll("[data-poll]");
    for (var i = 0; i < holders.length; i++) poll(holders[i]);
    scenarioFile();
  });
})();
