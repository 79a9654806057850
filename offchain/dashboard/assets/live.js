// Live updates for the iota-rs dashboard: every few seconds ask the server for the page's body if the
// snapshot changed (`?partial=1&since=<generation>`; 204 when nothing changed) and swap it in. The
// server renders and escapes everything; this script only moves server HTML into <main> and writes
// plain text into the status badge. No data from the network is evaluated here.
(function () {
	'use strict';
	var main = document.getElementById('live');
	if (!main) { return; }
	var root = document.documentElement;
	var generation = root.getAttribute('data-generation') || '0';
	var every = Number(root.getAttribute('data-refresh-ms')) || 2000;
	var updates = 0;
	var badge = document.getElementById('live-state');
	function mark(text, cls) {
		if (badge) { badge.textContent = text; badge.className = cls; }
	}
	function tick() {
		var url = location.pathname + '?partial=1&since=' + encodeURIComponent(generation);
		fetch(url, { cache: 'no-store', credentials: 'same-origin' })
			.then(function (r) {
				if (r.status === 204) { mark('live', 'ok'); return null; }
				if (!r.ok) { mark('stale (HTTP ' + r.status + ')', 'down'); return null; }
				generation = r.headers.get('x-generation') || generation;
				return r.text();
			})
			.then(function (html) {
				if (html === null) { return; }
				main.innerHTML = html;
				updates += 1;
				root.setAttribute('data-live-updates', String(updates));
				root.setAttribute('data-generation', generation);
				mark('live', 'ok');
			})
			.catch(function () { mark('offline', 'down'); })
			.then(function () { setTimeout(tick, every); });
	}
	setTimeout(tick, every);
})();
