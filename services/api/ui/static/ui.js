// Ostinato web UI: live regions. An element with data-live="<url>" is refreshed every
// data-every seconds from that url, asked for as a fragment (header X-UI-Fragment), while the
// tab is visible. No framework, nothing fetched from anywhere but this server.
(function () {
  "use strict";

  function refresh(region) {
    if (document.hidden) { return Promise.resolve(); }
    return fetch(region.dataset.live, {
      headers: { "X-UI-Fragment": "1" }, credentials: "same-origin", cache: "no-store"
    }).then(function (response) {
      if (response.status === 401) { window.location.reload(); return null; }
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      return response.text();
    }).then(function (text) {
      if (text === null) { return; }
      region.innerHTML = text;  // the server escaped every value in it
      region.classList.remove("stale");
      region.dataset.updated = new Date().toISOString();
    }).catch(function () {
      region.classList.add("stale");  // keep the last rows; try again on the next tick
    });
  }

  function start(region) {
    var seconds = Math.max(1, parseInt(region.dataset.every || "3", 10));
    window.setInterval(function () { refresh(region); }, seconds * 1000);
  }

  function confirmForms() {
    document.querySelectorAll("button.danger").forEach(function (button) {
      button.addEventListener("click", function (event) {
        if (!window.confirm(button.textContent + "?")) { event.preventDefault(); }
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live]").forEach(start);
    confirmForms();
  });
}());
