// gpuroute's web page: an offline map of the served road network (GET /network, drawn by Leaflet, no
// tile server), routes between two clicked points by leaflet-routing-machine's OSRM v1 router pointed
// at this server's /route/v1, isochrone rings from /isochrone/v1, and a traffic slider that scales
// travel times through POST /customize and routes again. State for tests and curious people: window.gpuroute.
(function () {
  'use strict';

  var root = new URL('./', document.baseURI).href.replace(/\/$/, '');
  var $ = function (id) { return document.getElementById(id); };
  var ISO_COLORS = ['0571b0', '7b3294', 'ca0020', '008837'];
  var CLASS_STYLES = [  // major, medium, minor roads (GET /network's classes)
    { color: '#d9902f', weight: 3.5 },
    { color: '#b8a57a', weight: 2.5 },
    { color: '#a3a3a3', weight: 1.2 }
  ];

  var state = window.gpuroute = {
    root: root, map: null, control: null, health: null, net: null,
    route: null, routeSeq: 0, isoSeq: 0, isochrone: null,
    traffic: { factor: 1, sent: null, seq: 0, seconds: null, chain: Promise.resolve() }
  };

  function status(text, isError) {
    var el = $('status');
    el.textContent = text;
    el.className = isError ? 'error' : 'muted';
  }

  function fmtDistance(m) {
    return m.toFixed(1) + ' m' + (m >= 1000 ? ' (' + (m / 1000).toFixed(2) + ' km)' : '');
  }

  function fmtDuration(s) {
    var min = Math.floor(s / 60), sec = Math.round(s - 60 * min);
    if (sec === 60) { min += 1; sec = 0; }
    return s.toFixed(1) + ' s' + (s >= 60 ? ' (' + min + ' min ' + sec + ' s)' : '');
  }

  function getJSON(url, options) {
    return fetch(url, options).then(function (r) {
      return r.json().catch(function () { return { code: 'HTTP' + r.status, message: r.statusText }; })
        .then(function (body) {
          if (!r.ok) {
            var e = new Error((body.code || r.status) + ': ' + (body.message || r.statusText));
            e.body = body;
            throw e;
          }
          return body;
        });
    });
  }

  // ------------------------------------------------------------------------------------------ network
  function drawNetwork(map, net) {
    var nodes = net.nodes, edges = net.edges, classes = net.classes;
    var lines = [[], [], []];
    for (var i = 0; i < classes.length; i++) {
      var u = edges[2 * i], v = edges[2 * i + 1];
      lines[classes[i]].push([[nodes[2 * u + 1], nodes[2 * u]], [nodes[2 * v + 1], nodes[2 * v]]]);
    }
    var renderer = L.canvas({ padding: 0.3 });
    for (var c = 2; c >= 0; c--) {
      if (lines[c].length) {
        L.polyline(lines[c], L.extend({ renderer: renderer, interactive: false, opacity: 0.9 },
          CLASS_STYLES[c])).addTo(map);
      }
    }
    var b = net.bbox;
    map.fitBounds([[b[1], b[0]], [b[3], b[2]]], { padding: [10, 10] });
    map.attributionControl.addAttribution(net.attribution + ' · drawn from /network, no tiles');
    $('network-note').textContent = net.note + '.';
  }

  // ------------------------------------------------------------------------------------------ routes
  function setupRouting(map) {
    var router = L.Routing.osrmv1({ serviceUrl: root + '/route/v1', profile: 'driving' });
    var control = L.Routing.control({
      router: router,
      waypoints: [],
      routeWhileDragging: false,
      addWaypoints: false,
      fitSelectedRoutes: false,
      showAlternatives: true,
      collapsible: true,
      lineOptions: { styles: [{ color: '#fff', opacity: 0.9, weight: 8 }, { color: '#1b5fd1', opacity: 1, weight: 5 }],
        addWaypoints: false },
      altLineOptions: { styles: [{ color: '#fff', opacity: 0.8, weight: 7 }, { color: '#7f9fd8', opacity: 0.9, weight: 4 }] }
    }).addTo(map);
    var itinerary = control.getContainer();
    itinerary.hidden = true;  // empty until there is a route
    control.on('routeselected', function (e) { itinerary.hidden = false; showRoute(e.route); });
    control.on('routingstart', function () { $('route-error').hidden = true; });
    control.on('routingerror', function (e) {
      var err = e.error || {};
      $('route-error').textContent = 'no route: ' + (err.message || err.status || 'error');
      $('route-error').hidden = false;
    });
    map.on('click', function (e) {
      var wps = control.getWaypoints();
      if (!wps[0].latLng) control.spliceWaypoints(0, 1, e.latlng);
      else control.spliceWaypoints(wps.length - 1, 1, e.latlng);
    });
    $('clear').addEventListener('click', function () {
      control.setWaypoints([]);
      itinerary.hidden = true;
      state.route = null;
      $('route-distance').textContent = '–';
      $('route-duration').textContent = '–';
    });
    return control;
  }

  function showRoute(route) {
    var s = route.summary;
    state.route = {
      distance: s.totalDistance,
      duration: s.totalTime,
      input: route.inputWaypoints.map(function (w) { return [w.latLng.lng, w.latLng.lat]; }),
      snapped: route.waypoints.map(function (w) { return [w.latLng.lng, w.latLng.lat]; })
    };
    var d = $('route-distance'), t = $('route-duration');
    d.textContent = fmtDistance(s.totalDistance);
    d.dataset.meters = String(s.totalDistance);
    t.textContent = fmtDuration(s.totalTime);
    t.dataset.seconds = String(s.totalTime);
    state.routeSeq += 1;
    document.body.dataset.routeSeq = String(state.routeSeq);
  }

  function origin() {
    var wps = state.control ? state.control.getWaypoints() : [];
    return wps.length && wps[0].latLng ? wps[0].latLng : null;
  }

  // ------------------------------------------------------------------------------------------ isochrones
  function setupIsochrones(map) {
    var layer = L.layerGroup().addTo(map);
    var can = state.health.services.indexOf('isochrone') >= 0;
    $('iso-button').disabled = !can;
    if (!can) $('iso-status').textContent = 'this engine serves no isochrones';
    $('iso-button').addEventListener('click', function () { drawIsochrone(layer); });
    $('iso-clear').addEventListener('click', function () {
      layer.clearLayers();
      $('iso-legend').innerHTML = '';
      $('iso-status').textContent = '';
      state.isochrone = null;
    });
  }

  function drawIsochrone(layer) {
    var o = origin(), st = $('iso-status');
    if (!o) { st.textContent = 'click the map to set an origin first'; return; }
    var minutes = $('iso-minutes').value.split(/[,; ]+/).filter(Boolean);
    var colors = minutes.map(function (_, i) { return ISO_COLORS[i % ISO_COLORS.length]; });
    var url = root + '/isochrone/v1/driving/' + o.lng + ',' + o.lat + '?contours_minutes=' +
      encodeURIComponent(minutes.join(',')) + '&contours_colors=' + colors.join(',');
    st.textContent = 'computing…';
    var t0 = performance.now();
    getJSON(url).then(function (fc) {
      layer.clearLayers();
      L.geoJSON(fc, {
        style: function (f) {
          return { color: f.properties.color || '#333', weight: 2, opacity: 0.9, fillOpacity: 0.12,
            className: 'gpuroute-iso' };
        },
        interactive: false
      }).addTo(layer);
      var legend = $('iso-legend');
      legend.innerHTML = '';
      fc.features.slice().reverse().forEach(function (f) {
        var li = document.createElement('li');
        var sw = document.createElement('i');
        sw.style.background = f.properties.color;
        li.appendChild(sw);
        li.appendChild(document.createTextNode(f.properties.metric === 'duration'
          ? (f.properties.contour / 60) + ' min' : f.properties.contour + ' m'));
        legend.appendChild(li);
      });
      state.isochrone = { url: url, rings: fc.features.length };
      st.textContent = fc.features.length + ' rings, ' + Math.round(performance.now() - t0) + ' ms';
      state.isoSeq += 1;
      document.body.dataset.isoSeq = String(state.isoSeq);
    }).catch(function (e) { st.textContent = e.message; st.className = 'error'; });
  }

  // ------------------------------------------------------------------------------------------ traffic
  function setupTraffic(map, net) {
    var slider = $('traffic'), st = $('traffic-status');
    var reason = null;
    var overlay = (state.health.capabilities || []).every(function (c) {
      return c.service !== 'customize' || c.algorithm !== 'none';
    });
    if (!overlay) reason = 'traffic needs a dataset directory: gpuroute build GRAPH -o DIR, then gpuroute serve DIR';
    else if (!state.health.customize) reason = 'POST /customize is off on this server (gpuroute serve --allow-customize)';
    else if (!net.arcs) reason = 'traffic needs a dataset directory: gpuroute build GRAPH -o DIR, then gpuroute serve DIR';
    if (reason) {
      slider.disabled = true;
      $('traffic-scope').disabled = true;
      st.textContent = reason;
      return;
    }
    slider.addEventListener('input', function () { $('traffic-value').textContent = Number(slider.value).toFixed(1); });
    var apply = function () {
      var f = Number(slider.value), scope = $('traffic-scope').value;
      $('traffic-value').textContent = f.toFixed(1);
      state.traffic.chain = state.traffic.chain.then(function () { return applyTraffic(map, net, f, scope); });
    };
    slider.addEventListener('change', apply);
    $('traffic-scope').addEventListener('change', function () {  // a new scope matters only under traffic
      if (Number(slider.value) !== 1 || state.traffic.factor !== 1) apply();
    });
  }

  // The bodies to POST: a reset to the "time" metric when the page has not customized yet or the factor
  // is back to 1, then the arcs whose cost differs from what the server holds, in chunks.
  function trafficBodies(map, net, f, scope) {
    var t = state.traffic, bodies = [];
    if (t.sent === null || f === 1) {
      bodies.push({ metric: 'time' });
      t.pending = Int32Array.from(net.costs);
    } else {
      t.pending = Int32Array.from(t.sent);
    }
    if (f === 1) return bodies;
    var bounds = map.getBounds(), nodes = net.nodes, edges = net.edges, arcs = net.arcs, costs = net.costs;
    var updates = [];
    for (var i = 0; i < edges.length / 2; i++) {
      var inScope = scope === 'all';
      if (!inScope) {
        var u = edges[2 * i], v = edges[2 * i + 1];
        inScope = bounds.contains([(nodes[2 * u + 1] + nodes[2 * v + 1]) / 2, (nodes[2 * u] + nodes[2 * v]) / 2]);
      }
      for (var j = 0; j < 2; j++) {
        var k = 2 * i + j, a = arcs[k];
        if (a < 0) continue;
        var want = inScope ? Math.max(1, Math.round(costs[k] * f)) : costs[k];
        if (t.pending[k] !== want) {
          updates.push({ arc: a, cost: want });
          t.pending[k] = want;
        }
      }
    }
    var per = net.updates_per_post || 20000;
    for (var s = 0; s < updates.length; s += per) bodies.push({ updates: updates.slice(s, s + per) });
    return bodies;
  }

  function applyTraffic(map, net, f, scope) {
    var t = state.traffic, st = $('traffic-status');
    var bodies = trafficBodies(map, net, f, scope);
    var seconds = 0, arcs = 0, resets = 0;
    st.className = 'muted';
    st.textContent = 'customizing…';
    var post = bodies.reduce(function (p, body) {
      return p.then(function () {
        return getJSON(root + '/customize', { method: 'POST', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(body) }).then(function (res) {
          seconds += res.seconds;
          if (body.metric) resets += 1; else arcs += res.arcs;
        });
      });
    }, Promise.resolve());
    return post.then(function () {
      t.sent = t.pending;
      t.factor = f;
      t.seconds = seconds;
      var what = bodies.length === 0 ? 'nothing to change'
        : (resets ? 'reset to the time metric' + (arcs ? ' + ' : '') : '') + (arcs ? arcs + ' arcs re-costed' : '');
      st.textContent = '×' + f.toFixed(1) + ': ' + what + '; customization ' + (1000 * seconds).toFixed(1) +
        ' ms (' + bodies.length + ' POST' + (bodies.length === 1 ? '' : 's') + ')';
      st.dataset.seconds = String(seconds);
      st.dataset.factor = String(f);
      t.seq += 1;
      document.body.dataset.trafficSeq = String(t.seq);
      var wps = state.control.getWaypoints();
      if (wps.every(function (w) { return w.latLng; })) state.control.route();
    }).catch(function (e) {
      t.sent = null;  // unknown server state: the next change starts with a reset
      st.textContent = 'customize failed: ' + e.message;
      st.className = 'error';
    });
  }

  // ------------------------------------------------------------------------------------------ start
  function start() {
    var map = state.map = L.map('map', { zoomSnap: 0.25 });
    Promise.all([getJSON(root + '/health'), getJSON(root + '/network')]).then(function (r) {
      var health = state.health = r[0], net = state.net = r[1];
      $('graph-name').textContent = net.graph;
      drawNetwork(map, net);
      state.control = setupRouting(map);
      setupIsochrones(map);
      setupTraffic(map, net);
      var caps = {};
      (health.capabilities || []).forEach(function (c) { caps[c.service] = c.algorithm; });
      status((health.engine ? health.engine.nodes.toLocaleString() + ' nodes, ' +
        health.engine.arcs.toLocaleString() + ' arcs; ' : '') + 'routes by ' + (caps.route || 'the engine') + '.');
      document.body.dataset.ready = '1';
    }).catch(function (e) { status('could not load the network: ' + e.message, true); });
  }

  start();
})();
