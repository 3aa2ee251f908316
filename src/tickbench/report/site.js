(function () {
  'use strict';
  var D = window.TICKBENCH_SITE, own = null;
  var S = {suite: D.suites.length ? D.suites[0].name : '', engines: null, bench: '', scale: ''};
  function $(id) { return document.getElementById(id); }
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { if (attrs[k] != null) e.setAttribute(k, attrs[k]); });
    (kids || []).forEach(function (k) { e.append(k instanceof Node ? k : String(k)); });
    return e;
  }
  function uniq(xs) { return xs.filter(function (x, i) { return xs.indexOf(x) === i; }); }
  function fmt(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toPrecision(2); }
  function median(xs) {
    if (!xs.length) return null;
    var s = xs.slice().sort(function (a, b) { return a - b; }), m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  }
  function colour(r) {  // green at the fastest, red from 16x on, by log2 of the ratio
    if (r == null) return null;
    return 'hsl(' + Math.round(120 * (1 - Math.min(Math.log2(Math.max(r, 1)) / 4, 1))) + ',70%,86%)';
  }
  // -- the URL keeps the choice -------------------------------------------------------------
  function readHash() {
    var p = new URLSearchParams(location.hash.slice(1));
    if (p.get('suite')) S.suite = p.get('suite');
    S.engines = p.has('engines') ? p.get('engines').split(',').filter(Boolean) : null;
    S.bench = p.get('bench') || ''; S.scale = p.get('scale') || '';
  }
  function writeHash() {
    var p = new URLSearchParams();
    p.set('suite', S.suite);
    if (S.engines) p.set('engines', S.engines.join(','));
    if (S.bench) p.set('bench', S.bench);
    if (S.scale) p.set('scale', S.scale);
    history.replaceState(null, '', '#' + p.toString());
  }
  function shown(c) {
    var terms = S.bench.split(',').map(function (t) { return t.trim().toLowerCase(); }).filter(Boolean);
    return (!S.engines || S.engines.indexOf(c.engine) >= 0) && (!S.scale || String(c.scale) === S.scale) &&
      (!terms.length || terms.some(function (t) { return c.benchmark.toLowerCase().indexOf(t) >= 0; }));
  }
  // -- tables --------------------------------------------------------------------------------
  function cellTd(c, cls) {
    var ratio = c.ratio == null ? (c.in_memory && c.value != null ? 'in-memory reference, not ranked' : '')
      : c.fastest ? 'fastest' : fmt(c.ratio) + '× the fastest' + (c.own ? ' (' + c.best_engine + ')' : '');
    if (c.figure) ratio = c.figure + (ratio ? ' · ' + ratio : '');
    var td = el('td', {'class': 'cell num ' + cls + (c.fastest ? ' fastest' : '') + (c.status === 'ok' ? '' : ' na'),
                        'data-cell': c.key, title: c.reason || null},
                [c.text, el('span', {'class': 'ratio'}, [ratio])]);
    if (colour(c.ratio)) td.style.background = colour(c.ratio);
    td.addEventListener('click', function () { detail(c); });
    return td;
  }
  function table(cells, title) {
    var col = function (c) { return (c.own ? 'own|' : c.in_memory ? 'ref|' : '|') + c.engine; };
    // an engine not available where the run ran is a line under the table, not a column of reasons
    var away = uniq(cells.map(col)).filter(function (k) {
      return cells.every(function (c) { return col(c) !== k || c.status === 'unavailable'; });
    });
    cells = cells.filter(function (c) { return away.indexOf(col(c)) < 0; });
    var cols = uniq(cells.map(col)).sort(function (a, b) {  // ranked engines, then in-memory references, then yours
      var r = function (x) { return x.startsWith('own|') ? 2 : x.startsWith('ref|') ? 1 : 0; };
      return r(a) - r(b) || (a < b ? -1 : a > b ? 1 : 0);
    });
    var benches = uniq(cells.map(function (c) { return c.benchmark; }));
    var head = el('tr', {}, [el('th', {}, ['benchmark'])].concat(cols.map(function (k) {
      var kind = k.split('|')[0], name = k.slice(kind.length + 1);
      return el('th', {'class': kind || null}, [name + (kind === 'ref' ? ' (in-memory reference)' : kind === 'own' ? ' (yours)' : '')]);
    })));
    var rows = benches.map(function (b) {
      return el('tr', {}, [el('th', {}, [b])].concat(cols.map(function (k) {
        var c = cells.find(function (x) { return x.benchmark === b && col(x) === k; });
        return c ? cellTd(c, k.split('|')[0]) : el('td', {'class': k.split('|')[0]});
      })));
    });
    var out = [el('h3', {}, [title]), el('table', {}, [head].concat(rows))];
    if (away.length) out.push(el('p', {'class': 'muted'}, ['Not available where it ran: ' +
      away.map(function (k) { return k.split('|')[1]; }).join(', ') + '.']));
    return out;
  }
  function runTable(runs) {
    return el('table', {'class': 'runs'}, [el('tr', {}, ['run', 'machine and software', 'dataset', 'engines', 'conditions']
      .map(function (h) { return el('th', {}, [h]); }))].concat(runs.map(function (r) {
      var ds = r.dataset;
      return el('tr', {'data-run': r.id}, [
        el('td', {}, [r.id, el('br'), r.created, el('br'), r.file]),
        el('td', {}, [r.machine, el('br'), r.software, el('br'), r.protocol]),
        el('td', {}, ['content hash ' + ds.content_hash, el('br'), ds.source + ', scale ' + ds.scale + ', seed ' + ds.seed +
                      ', +' + ds.symbols + ' symbols, generator ' + ds.generator_version]),
        el('td', {}, [Object.keys(r.engines).map(function (e) { return e + ' ' + (r.engines[e].version || '—'); }).join('; ')]),
        el('td', {}, [r.conditions || '—'])]);
    })));
  }
  function views() {
    var root = $('views'); root.textContent = '';
    var all = D.cells.filter(function (c) { return c.current; }).concat(own && own.matched ? own.cells : []);
    var suites = uniq(D.suites.map(function (s) { return s.name; }).concat(all.map(function (c) { return c.suite; })));
    var tabs = $('tabs'); tabs.textContent = '';
    suites.concat(['history']).forEach(function (name) {
      var b = el('button', {'aria-selected': String(name === S.suite), 'data-tab': name}, [name === 'history' ? 'History' : (D.titles[name] || name)]);
      b.addEventListener('click', function () { S.suite = name; render(); });
      tabs.append(b);
    });
    suites.forEach(function (name) {
      var mine = all.filter(function (c) { return c.suite === name; });
      var sec = el('section', {'data-suite': name, hidden: name === S.suite ? null : ''}, [el('h2', {}, [D.titles[name] || name])]);
      var groups = uniq(mine.map(function (c) { return c.category + '|' + c.hash; }));
      groups.forEach(function (g) {
        var cs = mine.filter(function (c) { return c.category + '|' + c.hash === g && shown(c); });
        if (!cs.length) return;
        sec.append.apply(sec, table(cs, cs[0].category + ' · scale ' + cs[0].scale + ' · dataset ' + cs[0].hash));
      });
      var runs = uniq(mine.filter(function (c) { return !c.own; }).map(function (c) { return c.run; }))
        .map(function (i) { return D.runs[i]; });
      sec.append(el('h3', {}, ['Machine, date, versions and conditions of these runs']), runTable(runs));
      root.append(sec);
    });
    root.append(historyView());
  }
  // -- history -------------------------------------------------------------------------------
  function plotHistory(div, key) {
    var pts = D.history[key];
    Plotly.newPlot(div, [{x: pts.map(function (p) { return p.created; }), y: pts.map(function (p) { return p.value; }),
      mode: 'lines+markers+text', textposition: 'top center', name: key.split('|')[3],
      text: pts.map(function (p) { return p.engine_version; }),
      customdata: pts.map(function (p) { return [p.engine_version, p.tickbench_version, D.runs[p.run].id]; }),
      hovertemplate: '%{y:.4g} ' + pts[0].unit + '<br>engine %{customdata[0]}<br>tickbench %{customdata[1]}<br>run %{customdata[2]}<extra></extra>'}],
      {margin: {t: 30, r: 20, b: 50, l: 60}, yaxis: {title: {text: pts[0].unit}, rangemode: 'tozero'},
       xaxis: {title: {text: 'run date (labels: engine version)'}}, title: {text: key.split('|').filter(function (x, i) { return i !== 1; }).join(' · ')}},
      {displaylogo: false, responsive: true}).then(function () { div.setAttribute('data-rendered', '1'); });
  }
  function historyView() {
    var keys = Object.keys(D.history).filter(function (k) {
      var p = k.split('|'); return shown({engine: p[3], benchmark: p[2], scale: D.runs[D.history[k][0].run].dataset.scale});
    });
    var sec = el('section', {'data-suite': 'history', hidden: S.suite === 'history' ? null : ''}, [el('h2', {}, ['History']),
      el('p', {'class': 'muted'}, ['A cell held by several results files (same suite, benchmark, engine and dataset), ' +
        'plotted against the run date, with the engine\'s and tickbench\'s versions.'])]);
    if (!keys.length) { sec.append(el('p', {}, ['No cell is held by more than one run (under these filters).'])); return sec; }
    var pick = el('select', {id: 'history-pick'}, keys.map(function (k) { return el('option', {value: k}, [k.split('|').filter(function (x, i) { return i !== 1; }).join(' · ')]); }));
    var div = el('div', {'class': 'hist', id: 'history-chart'});
    pick.addEventListener('change', function () { plotHistory(div, pick.value); });
    sec.append(pick, div);
    if (S.suite === 'history') setTimeout(function () { plotHistory(div, pick.value); });
    return sec;
  }
  // -- a cell's details ----------------------------------------------------------------------
  function detail(c) {
    var d = $('detail'); d.textContent = ''; d.hidden = false;
    var close = el('button', {id: 'detail-close'}, ['close']);
    close.addEventListener('click', function () { d.hidden = true; });
    var run = c.own ? own.run : D.runs[c.run];
    var facts = [['status', c.mark + ' ' + c.status + (c.verified === false ? ' (not verifiable)' : '') + (c.reason ? ': ' + c.reason : '')],
      ['run', run.id + ' (' + run.created + ')' + (c.own ? ', your file' : ', ' + run.file)],
      ['engine version', c.engine_version || '—'],
      ['median', c.median_ms == null ? '—' : fmt(c.median_ms) + ' ms'],
      ['server time (median)', c.server_ms == null ? 'not reported by the engine' : fmt(c.server_ms) + ' ms'],
      ['harness share', c.harness_ms == null ? '—' : fmt(c.harness_ms) + ' ms' + (c.transport_bound ? ' ⚠ transport-bound' : '')],
      ['repetitions (ms)', c.samples_ms.map(fmt).join(', ') || '—'],
      ['server time of each (ms)', c.server_samples_ms.map(fmt).join(', ') || '—']];
    d.append(close, el('h2', {}, [c.benchmark + ' on ' + c.engine]), el('p', {}, [c.text]),
      el('table', {}, facts.map(function (f) { return el('tr', {}, [el('th', {}, [f[0]]), el('td', {}, [f[1]])]); })),
      el('h3', {}, ['Query' + (c.query_file ? ' (' + c.query_file + ')' : '')]), el('pre', {id: 'detail-query'}, [c.query || '—']),
      el('h3', {}, ['The engine\'s plan']), el('pre', {id: 'detail-plan'}, [c.plan || 'none recorded']));
    if (c.notes) d.append(el('p', {'class': 'muted'}, [c.notes]));
    var hk = [c.suite, c.hash, c.benchmark, c.engine].join('|');
    if (!c.own && D.history[hk]) { var div = el('div', {'class': 'hist'}); d.append(el('h3', {}, ['History']), div); plotHistory(div, hk); }
  }
  // -- your own run --------------------------------------------------------------------------
  function ownCell(r, rec, matched) {
    var st = rec.stats || null, srv = median((rec.server_samples_ns || []).map(function (s) { return s / 1e6; }));
    var ms = rec.status === 'ok' && st ? st.median_ms : null, gap = ms != null && srv != null ? ms - srv : null;
    var tb = gap != null && gap > Math.max(D.transport.share * ms, D.transport.floor_ms);
    var kind = ((r.environment.engines || {})[rec.engine] || {}).kind;
    var c = {own: true, suite: String(rec.suite), category: String(rec.category), benchmark: String(rec.benchmark),
      engine: String(rec.engine), hash: matched ? String(r.dataset.content_hash) : 'yours', scale: r.dataset.scale,
      status: String(rec.status), verified: rec.verified, reason: rec.reason || '', notes: rec.notes || '',
      mark: rec.status === 'ok' ? '✔' : rec.status === 'timeout' ? '⏱' : rec.status === 'wrong' || rec.status === 'error' ? '✘' : '—',
      median_ms: ms, value: ms, server_ms: srv, harness_ms: gap, transport_bound: tb,
      samples_ms: (rec.samples_ns || []).map(function (s) { return s / 1e6; }),
      server_samples_ms: (rec.server_samples_ns || []).map(function (s) { return s / 1e6; }),
      query: rec.query ? String(rec.query.text) : '', query_file: rec.query ? String(rec.query.file) : '',
      plan: rec.plan || '', in_memory: kind === 'in-memory',
      engine_version: String(((r.environment.engines || {})[rec.engine] || {}).version || '')};
    c.key = 'own|' + c.suite + '|' + c.benchmark + '|' + c.engine;
    c.text = rec.status !== 'ok' ? c.mark + ' ' + c.status : ms == null ? '✔' :
      fmt(ms) + ' ms' + (srv != null ? ' (server ' + fmt(srv) + ')' : '') + ' ✔' + (tb ? ' ⚠ transport-bound (+' + fmt(gap) + ' ms)' : '');
    return c;
  }
  function rank(cells, bestOf) {
    cells.forEach(function (c) {
      var b = c.value == null || c.in_memory ? null : bestOf(c);
      c.ratio = b && b.ms > 0 ? c.value / b.ms : null; c.best_engine = b ? b.engine : '';
      c.fastest = false;
    });
  }
  var PARAMS = ['content_hash', 'scale', 'seed', 'symbols', 'source', 'generator_version'];
  function load(name, text) {
    var msg = $('own-message'), r;
    own = null; $('own-alone').textContent = '';
    function fail(m) { msg.className = 'msg-error'; msg.textContent = name + ': ' + m; render(); }
    try { r = JSON.parse(text); } catch (e) { return fail('not a tickbench results file (not JSON: ' + e.message + ').'); }
    if (!r || typeof r !== 'object' || !('schema_version' in r) || !Array.isArray(r.records))
      return fail('not a tickbench results file (it has no schema_version and records): choose the results.json a tickbench run wrote.');
    if (r.schema_version !== D.schema_version)
      return fail('results schema version ' + JSON.stringify(r.schema_version) + '; this site reads version ' + D.schema_version +
                  ': run it again with this tickbench, or build a site with the tickbench version that wrote it.');
    if (!r.dataset || typeof r.dataset !== 'object' || !r.environment || typeof r.environment !== 'object')
      return fail('not a valid results file (no dataset or environment).');
    var refs = D.runs.filter(function (x) { return x.dataset.content_hash === r.dataset.content_hash; });
    var matched = refs.length > 0;
    var cells = r.records.filter(function (rec) { return rec && typeof rec === 'object'; })
      .map(function (rec) { return ownCell(r, rec, matched); });
    own = {run: {id: String(r.run_id), created: String(r.created)}, cells: cells, matched: matched};
    msg.className = '';
    if (matched) {
      rank(cells, function (c) { return D.best_ms[c.suite + '|' + c.hash + '|' + c.benchmark]; });
      msg.textContent = name + ': run ' + r.run_id + ' on the reference\'s dataset (content hash ' + r.dataset.content_hash +
        '): its ' + cells.length + ' cells are shown beside the reference, as ratios to the reference\'s fastest.';
    } else {
      var same = D.runs.filter(function (x) { return x.suite === r.suite; });
      var ref = same.length ? same[same.length - 1] : D.runs[D.runs.length - 1];
      var diff = ref ? PARAMS.filter(function (p) { return String(r.dataset[p]) !== String(ref.dataset[p]); })
        .map(function (p) { return p.replace('_', ' ') + ' ' + r.dataset[p] + ' (reference: ' + ref.dataset[p] + ')'; }) : [];
      msg.textContent = name + ': not on a reference dataset, so shown alone (ratios to its own fastest). It differs in ' +
        diff.join('; ') + (ref ? ', against reference run ' + ref.id + ' (' + ref.file + ').' : '.');
      msg.setAttribute('data-differs', PARAMS.filter(function (p) { return ref && String(r.dataset[p]) !== String(ref.dataset[p]); }).join(','));
      var best = {};
      cells.forEach(function (c) {
        var k = c.suite + '|' + c.benchmark;
        if (c.value != null && !c.in_memory && (!best[k] || c.value < best[k].ms)) best[k] = {ms: c.value, engine: c.engine};
      });
      rank(cells, function (c) { return best[c.suite + '|' + c.benchmark]; });
      cells.forEach(function (c) { c.fastest = c.ratio === 1; });
    }
    render();
  }
  function renderAlone() {
    var root = $('own-alone'); root.textContent = '';
    if (!own || own.matched) return;
    root.append(el('h2', {}, ['Your run ' + own.run.id + ' (' + own.run.created + '), alone']));
    uniq(own.cells.map(function (c) { return c.suite + '|' + c.category; })).forEach(function (g) {
      var cs = own.cells.filter(function (c) { return c.suite + '|' + c.category === g && shown(c); });
      if (cs.length) root.append.apply(root, table(cs, cs[0].suite + ' · ' + cs[0].category + ' · scale ' + cs[0].scale));
    });
  }
  // -- filters -------------------------------------------------------------------------------
  function filters() {
    var all = D.cells.concat(own ? own.cells : []);
    var box = $('f-engines'); box.textContent = '';
    uniq(all.map(function (c) { return c.engine; })).sort().forEach(function (e) {
      var cb = el('input', {type: 'checkbox', value: e, 'data-engine': e});
      cb.checked = !S.engines || S.engines.indexOf(e) >= 0;
      cb.addEventListener('change', function () {
        var on = Array.prototype.filter.call(box.querySelectorAll('input'), function (x) { return x.checked; })
          .map(function (x) { return x.value; });
        S.engines = on.length === box.querySelectorAll('input').length ? null : on; render();
      });
      box.append(el('label', {}, [cb, ' ' + e]));
    });
    $('f-bench').value = S.bench;
    var sel = $('f-scale'); sel.textContent = '';
    [''].concat(uniq(all.map(function (c) { return String(c.scale); }))).forEach(function (s) {
      var o = el('option', {value: s}, [s ? 'scale ' + s : 'every scale']); o.selected = s === S.scale; sel.append(o);
    });
  }
  function render() {
    writeHash(); filters(); views(); renderAlone();
    document.body.setAttribute('data-ready', '1');
  }
  $('f-bench').addEventListener('change', function () { S.bench = this.value; render(); });
  $('f-scale').addEventListener('change', function () { S.scale = this.value; render(); });
  function readFile(f) {
    if (!f) return;
    var fr = new FileReader();
    fr.onload = function () { load(f.name, String(fr.result)); };
    fr.onerror = function () { load(f.name, ''); };
    fr.readAsText(f);
  }
  $('own-file').addEventListener('change', function () { readFile(this.files[0]); });
  var drop = $('drop');
  ['dragenter', 'dragover'].forEach(function (t) { document.addEventListener(t, function (e) { e.preventDefault(); drop.classList.add('over'); }); });
  document.addEventListener('dragleave', function () { drop.classList.remove('over'); });
  document.addEventListener('drop', function (e) { e.preventDefault(); drop.classList.remove('over'); readFile(e.dataTransfer.files[0]); });
  window.addEventListener('hashchange', function () { readHash(); render(); });
  readHash(); render();
})();
