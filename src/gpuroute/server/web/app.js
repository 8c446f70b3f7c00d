// gpuroute's web page: an offline map of the served road network (GET /network, drawn by Leaflet, no
// tile server), routes between two clicked points by leaflet-routing-machine's OSRM v1 router pointed
// at this server's /route/v1 (with alternatives, areas to avoid drawn with leaflet-geoman, and a
// departure time when the server has a time profile), isochrone rings from /isochrone/v1, and a traffic
// slider that scales travel times through POST /customize and routes again. State for tests and curious
// people: window.gpuroute.
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
    route: null, routeSeq: 0, routeErrors: 0, routes: 0, alternatives: 0, lastRouteUrl: null, isoSeq: 0,
    isochrone: null, avoidGroup: null, avoid: null, avoidSeq: 0, depart: null,
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
  // leaflet-routing-machine's OSRM v1 router, plus this page's options on every request it makes:
  // alternatives=N (its own URL says alternatives=true), avoid_polygons (GeoJSON, URL-encoded) and depart_at.
  var Router = L.Routing.OSRMv1.extend({
    // Every answer's routes numbered: leaflet-routing-machine numbers them (routesIndex) only for a new
    // route, not for the full geometry it fetches again after a zoom, and a click on an alternative then
    // selected the first route instead of the one clicked.
    route: function (waypoints, callback, context, options) {
      var self = context || callback;
      return L.Routing.OSRMv1.prototype.route.call(this, waypoints, function (err, routes) {
        if (!err && routes) routes.forEach(function (r, i) { r.routesIndex = i; });
        return callback.call(self, err, routes);
      }, context, options);
    },

    buildRouteUrl: function (waypoints, options) {
      var url = L.Routing.OSRMv1.prototype.buildRouteUrl.call(this, waypoints, options);
      var n = state.alternatives;
      url = url.replace('&alternatives=true', '&alternatives=' + (n === 0 ? 'false' : n === 1 ? 'true' : n));
      var avoid = avoidGeometry();
      if (avoid) url += '&avoid_polygons=' + encodeURIComponent(JSON.stringify(avoid));
      var depart = departAt();
      if (depart) url += '&depart_at=' + encodeURIComponent(depart);
      state.lastRouteUrl = url;
      return url;
    }
  });

  // The server's {code, message} of a failed route request (leaflet-routing-machine keeps only the status;
  // its error's target is the XMLHttpRequest of an HTTP error, or the event of a network error).
  function routeErrorText(err) {
    var xhr = err && err.target;
    if (xhr && !('responseText' in xhr)) xhr = xhr.target;
    if (xhr && xhr.responseText) {
      try {
        var body = JSON.parse(xhr.responseText);
        if (body && body.message) return body.code + ': ' + body.message;
      } catch (ignore) { /* not JSON: the status below */ }
    }
    return (err && (err.message || err.status)) || 'error';
  }

  function setupRouting(map) {
    var lim = (state.health.limits || {}).max_alternatives;  // null or < 0: no limit; 0: none
    var max = (lim === null || Number(lim) < 0) ? 3 : Math.max(0, Math.min(3, Number(lim) || 0));
    var sel = $('alternatives');
    for (var k = 1; k <= max; k++) {
      var opt = document.createElement('option');
      opt.value = String(k);
      opt.textContent = 'up to ' + k;
      sel.appendChild(opt);
    }
    sel.value = String(Math.min(2, max));
    state.alternatives = Number(sel.value);
    sel.disabled = max === 0;
    var router = new Router({ serviceUrl: root + '/route/v1', profile: 'driving' });
    // the chosen route: a dark blue line over a white casing; alternatives: thinner, lighter and dashed,
    // clickable (leaflet-routing-machine selects the one clicked, as a click on its row in the itinerary)
    var control = L.Routing.control({
      router: router,
      waypoints: [],
      routeWhileDragging: false,
      addWaypoints: false,
      fitSelectedRoutes: false,
      showAlternatives: true,
      collapsible: true,
      lineOptions: { styles: [{ color: '#fff', opacity: 0.9, weight: 8, pmIgnore: true },
        { color: '#1b5fd1', opacity: 1, weight: 5, className: 'gpuroute-route', pmIgnore: true }],
        addWaypoints: false },
      // a click on an alternative selects it and goes no further (not a new destination for the map)
      altLineOptions: { styles: [{ color: '#fff', opacity: 0.8, weight: 7, pmIgnore: true, bubblingMouseEvents: false },
        { color: '#6c8ebf', opacity: 0.95, weight: 4, dashArray: '8 6', className: 'gpuroute-alt', pmIgnore: true,
          bubblingMouseEvents: false }] }
    }).addTo(map);
    var itinerary = control.getContainer();
    itinerary.hidden = true;  // empty until there is a route
    control.on('routesfound', function (e) { state.routes = e.routes.length; });
    control.on('routeselected', function (e) { itinerary.hidden = false; showRoute(e.route); });
    control.on('routingstart', function () { $('route-error').hidden = true; });
    control.on('routingerror', function (e) {
      $('route-error').textContent = 'no route: ' + routeErrorText(e.error);
      $('route-error').hidden = false;
      state.routeErrors += 1;
      document.body.dataset.routeErrors = String(state.routeErrors);
    });
    map.on('click', function (e) {
      if (map.pm && (map.pm.globalDrawModeEnabled() || map.pm.globalEditModeEnabled() ||
          map.pm.globalRemovalModeEnabled() || map.pm.globalDragModeEnabled())) return;  // drawing an area
      var wps = control.getWaypoints();
      if (!wps[0].latLng) control.spliceWaypoints(0, 1, e.latlng);
      else control.spliceWaypoints(wps.length - 1, 1, e.latlng);
    });
    sel.addEventListener('change', function () {
      state.alternatives = Number(sel.value);
      reroute();
    });
    $('clear').addEventListener('click', function () {
      control.setWaypoints([]);
      itinerary.hidden = true;
      state.route = null;
      $('route-distance').textContent = '–';
      $('route-duration').textContent = '–';
      $('route-alts').textContent = '';
    });
    return control;
  }

  // Route again with the current options when both ends are set.
  function reroute() {
    var c = state.control;
    if (c && c.getWaypoints().every(function (w) { return w.latLng; })) c.route();
  }

  function showRoute(route) {
    var s = route.summary;
    state.route = {
      distance: s.totalDistance,
      duration: s.totalTime,
      index: route.routesIndex,
      routes: state.routes || 1,
      url: state.lastRouteUrl,
      coordinates: route.coordinates.map(function (c) { return [c.lng, c.lat]; }),
      input: route.inputWaypoints.map(function (w) { return [w.latLng.lng, w.latLng.lat]; }),
      snapped: route.waypoints.map(function (w) { return [w.latLng.lng, w.latLng.lat]; })
    };
    var d = $('route-distance'), t = $('route-duration');
    d.textContent = fmtDistance(s.totalDistance);
    d.dataset.meters = String(s.totalDistance);
    t.textContent = fmtDuration(s.totalTime);
    t.dataset.seconds = String(s.totalTime);
    var n = state.route.routes;
    $('route-alts').textContent = n > 1 ? 'route ' + (route.routesIndex + 1) + ' of ' + n +
      ': click a dashed line or a row below the map to choose another' : '';
    state.routeSeq += 1;
    document.body.dataset.routeSeq = String(state.routeSeq);
  }

  // ------------------------------------------------------------------------------------------ avoid areas
  // Polygons and rectangles drawn with leaflet-geoman (its toolbar, or the panel's button), editable,
  // movable and removable; every change routes again with them as avoid_polygons (one Polygon, or a
  // MultiPolygon of all of them). The server checks them (a self-intersecting ring cannot be drawn).
  function setupAvoid(map) {
    var st = $('avoid-status'), group = state.avoidGroup = L.featureGroup([], { pmIgnore: false }).addTo(map);
    var overlay = (state.health.capabilities || []).every(function (c) {
      return c.service !== 'customize' || c.algorithm !== 'none';
    });
    if (!overlay || !map.pm) {
      $('avoid-draw').disabled = $('avoid-clear').disabled = true;
      st.textContent = map.pm ? 'avoiding areas needs a dataset directory: gpuroute build GRAPH -o DIR, then ' +
        'gpuroute serve DIR' : 'the drawing plugin (leaflet-geoman) did not load';
      return;
    }
    map.pm.setGlobalOptions({
      layerGroup: group,
      allowSelfIntersection: false,
      snappable: false,
      pathOptions: { color: '#c0392b', weight: 2, fillColor: '#c0392b', fillOpacity: 0.15, className: 'gpuroute-avoid',
        pmIgnore: false }
    });
    map.pm.addControls({
      position: 'topleft', drawMarker: false, drawCircleMarker: false, drawPolyline: false, drawCircle: false,
      drawText: false, cutPolygon: false, rotateMode: false, drawPolygon: true, drawRectangle: true,
      editMode: true, dragMode: true, removalMode: true
    });
    var changed = function () { avoidChanged(); };
    map.on('pm:create', function (e) {
      e.layer.on('pm:edit pm:dragend', changed);
      changed();
    });
    map.on('pm:remove', changed);
    map.on('pm:drawend', function () { avoidChanged(true); });  // finished or cancelled: the status again
    $('avoid-draw').addEventListener('click', function () {
      map.pm.enableDraw('Polygon', { finishOn: null });
      st.textContent = 'click the corners; click the first one again to close the area';
    });
    $('avoid-clear').addEventListener('click', function () {
      map.pm.disableDraw();
      group.clearLayers();
      changed();
    });
    avoidChanged(true);
  }

  // The drawn areas as one GeoJSON geometry (Polygon, or MultiPolygon of several), or null.
  function avoidGeometry() {
    if (!state.avoidGroup) return null;
    var polys = [];
    state.avoidGroup.eachLayer(function (l) {
      if (!(l instanceof L.Polygon) || !state.map.hasLayer(l)) return;
      var g = l.toGeoJSON(6).geometry;
      if (g.type === 'Polygon') polys.push(g.coordinates);
      else if (g.type === 'MultiPolygon') polys = polys.concat(g.coordinates);
    });
    if (!polys.length) return null;
    return polys.length === 1 ? { type: 'Polygon', coordinates: polys[0] }
      : { type: 'MultiPolygon', coordinates: polys };
  }

  function avoidChanged(quiet) {
    var g = avoidGeometry(), n = g ? (g.type === 'Polygon' ? 1 : g.coordinates.length) : 0;
    var st = $('avoid-status');
    st.className = 'muted small';
    st.textContent = n ? n + ' area' + (n === 1 ? '' : 's') + ' avoided: routes take no road that enters ' +
      (n === 1 ? 'it' : 'them') : 'no area avoided: draw one with the button or the map\'s toolbar';
    state.avoid = g;
    state.avoidSeq = (state.avoidSeq || 0) + (quiet ? 0 : 1);
    document.body.dataset.avoidSeq = String(state.avoidSeq);
    if (!quiet) reroute();
  }

  // ------------------------------------------------------------------------------------------ departure
  // Shown only when the server has a time profile (GET /health: engine.time_profile, with its timezone,
  // slot_minutes, the days it covers and its valid_from/valid_until dates): a day of the week and a time
  // of day, one slot a step, sent as depart_at=YYYY-MM-DDTHH:MM (ISO 8601, the local time of the profile's
  // zone) on every route request. The date is the next one on that day (today, in the profile's zone,
  // included) within the profile's dates.
  var DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
  var DAY_NAMES = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];
  var DAY_MS = 86400000;

  function timeProfile(health) {
    return (health.engine && health.engine.time_profile) || null;
  }

  function pad2(x) { return (x < 10 ? '0' : '') + x; }

  function isoDate(ms) {  // a UTC midnight (ms) as YYYY-MM-DD
    var d = new Date(ms);
    return d.getUTCFullYear() + '-' + pad2(d.getUTCMonth() + 1) + '-' + pad2(d.getUTCDate());
  }

  function dateMs(text) {  // YYYY-MM-DD as a UTC midnight (ms), or null
    var m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text || '');
    return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : null;
  }

  // Today's date in the profile's zone (an IANA name; else the browser's own date) as a UTC midnight.
  function todayMs(zone) {
    var now = new Date();
    try {
      var parts = new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit',
        day: '2-digit' }).formatToParts(now);
      var get = function (t) { return Number(parts.filter(function (p) { return p.type === t; })[0].value); };
      return Date.UTC(get('year'), get('month') - 1, get('day'));
    } catch (e) {  // a fixed offset such as +01:00 is no zone name for Intl
      return Date.UTC(now.getFullYear(), now.getMonth(), now.getDate());
    }
  }

  function setupDepart() {
    var profile = timeProfile(state.health);
    if (!profile) return;  // the box stays hidden: no depart_at is ever sent
    $('depart-box').hidden = false;
    var day = $('depart-day'), time = $('depart-time');
    var days = (profile.days && profile.days.length ? profile.days : DAYS).filter(function (d) {
      return DAYS.indexOf(d) >= 0;
    });
    days.forEach(function (name) {
      var o = document.createElement('option');
      o.value = String(DAYS.indexOf(name));
      o.textContent = DAY_NAMES[DAYS.indexOf(name)];
      day.appendChild(o);
    });
    var today = (new Date(todayMs(profile.timezone)).getUTCDay() + 6) % 7;  // Monday = 0
    if (days.indexOf(DAYS[today]) >= 0) day.value = String(today);
    var slot = Number(profile.slot_minutes) || 15;
    time.step = String(slot);
    time.max = String(1440 - slot);
    time.value = String(Math.min(Number(time.max), Math.round(480 / slot) * slot));  // 08:00
    var show = function () {
      var m = Number(time.value);
      $('depart-value').textContent = pad2(Math.floor(m / 60)) + ':' + pad2(m % 60);
      var at = departAt();
      $('depart-status').textContent = at ? 'depart_at=' + at + ' (' + profile.timezone + ')'
        : 'no departure time: today\'s travel times';
    };
    var change = function () { $('depart-on').checked = true; show(); reroute(); };
    time.addEventListener('input', show);
    time.addEventListener('change', change);
    day.addEventListener('change', change);
    $('depart-on').addEventListener('change', function () { show(); reroute(); });
    state.depart = { profile: profile };
    show();
  }

  // depart_at for the chosen day and time, or null (no profile, or the box unticked).
  function departAt() {
    if (!state.depart || !$('depart-on').checked) return null;
    var p = state.depart.profile, want = Number($('depart-day').value), m = Number($('depart-time').value);
    var from = dateMs(p.valid_from), until = dateMs(p.valid_until);
    var base = todayMs(p.timezone);
    if (until !== null && base > until - 6 * DAY_MS) base = until - 6 * DAY_MS;  // the calendar's last week
    if (from !== null && base < from) base = from;
    var wd = (new Date(base).getUTCDay() + 6) % 7;
    return isoDate(base + ((want - wd + 7) % 7) * DAY_MS) + 'T' + pad2(Math.floor(m / 60)) + ':' + pad2(m % 60);
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
    // leaflet-geoman edits only layers that opt in (the drawn areas), never the network or the routes
    if (L.PM) L.PM.setOptIn(true);
    var map = state.map = L.map('map', { zoomSnap: 0.25, pmIgnore: false });
    Promise.all([getJSON(root + '/health'), getJSON(root + '/network')]).then(function (r) {
      var health = state.health = r[0], net = state.net = r[1];
      $('graph-name').textContent = net.graph;
      drawNetwork(map, net);
      state.control = setupRouting(map);
      setupIsochrones(map);
      setupTraffic(map, net);
      setupAvoid(map);
      setupDepart();
      var caps = {};
      (health.capabilities || []).forEach(function (c) { caps[c.service] = c.algorithm; });
      status((health.engine ? health.engine.nodes.toLocaleString() + ' nodes, ' +
        health.engine.arcs.toLocaleString() + ' arcs; ' : '') + 'routes by ' + (caps.route || 'the engine') + '.');
      document.body.dataset.ready = '1';
    }).catch(function (e) { status('could not load the network: ' + e.message, true); });
  }

  start();
})();
