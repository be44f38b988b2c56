/* SPDX-License-Identifier: MIT */
/* report_html.js — draws the timelines of the `gpumon report --html` page with uPlot from the
 * report document embedded in the page (#gpumon-data); embedded into the page at build time.
 * A value that is null is a gap in its line, never 0. Strings of the document only ever reach the
 * page through textContent (never as markup). */
(function () {
	'use strict';

	var root = document.documentElement;
	var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
	var DPR = window.devicePixelRatio || 1;

	/* ---- formatting (the same rules as the summary written in C) ---------------------------- */

	function isNum(v) {
		return typeof v === 'number' && isFinite(v);
	}

	function fmtBytes(b) {
		if (!isNum(b))
			return 'n/a';
		var v = Math.abs(b), u = 0;
		while (v >= 1024 && u + 1 < UNITS.length) {
			v /= 1024;
			u++;
		}
		var s = u === 0 ? v.toFixed(0) : v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0);
		return (b < 0 ? '-' : '') + s + ' ' + UNITS[u];
	}

	/* axis labels: round figures without trailing zeros ("20 GiB", "1.5 GiB") */
	function fmtBytesAxis(b) {
		if (!isNum(b))
			return '';
		var v = Math.abs(b), u = 0;
		while (v >= 1024 && u + 1 < UNITS.length) {
			v /= 1024;
			u++;
		}
		return (b < 0 ? '-' : '') + String(Number(v.toPrecision(3))) + ' ' + UNITS[u];
	}

	/* seconds since the start as minutes:seconds ("0:35.2", "13:31.9", "1:02:03") */
	function fmtClock(s, decimals) {
		if (!isNum(s))
			return 'n/a';
		if (decimals == null)
			decimals = 1;
		var sign = s < 0 ? '-' : '';
		s = Math.abs(s);
		if (s >= 3600) {
			var t = Math.round(s);
			return sign + Math.floor(t / 3600) + ':' + pad2(Math.floor(t / 60) % 60) + ':' + pad2(t % 60);
		}
		var m = Math.floor(s / 60), sec = s - 60 * m;
		var txt = sec.toFixed(decimals);
		if (Number(txt) >= 60) {
			m++;
			txt = (0).toFixed(decimals);
		}
		if (Number(txt) < 10)
			txt = '0' + txt;
		return sign + m + ':' + txt;
	}

	function pad2(n) {
		return n < 10 ? '0' + n : String(n);
	}

	/* ---- the document --------------------------------------------------------------------- */

	function readDocument() {
		var el = document.getElementById('gpumon-data');
		return JSON.parse(el ? el.textContent : 'null') || {};
	}

	function arr(v) {
		return Array.isArray(v) ? v : [];
	}

	function obj(v) {
		return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
	}

	/*
	 * The points of a series with a usable x (a finite number), in ascending x: uPlot needs both.
	 * Returns {x, ys: [...]} with the y arrays cut to the same length; a y that is not a finite
	 * number becomes null (a gap).
	 */
	function cleanSeries(x, ys) {
		x = arr(x);
		var n = x.length;
		ys = ys.map(function (y) {
			return arr(y);
		});
		var idx = [], sorted = true, prev = -Infinity;
		for (var i = 0; i < n; i++) {
			if (!isNum(x[i]))
				continue;
			if (x[i] < prev)
				sorted = false;
			prev = x[i];
			idx.push(i);
		}
		if (!sorted)
			idx.sort(function (a, b) {
				return x[a] - x[b] || a - b;
			});
		return {
			x: idx.map(function (i) {
				return x[i];
			}),
			ys: ys.map(function (y) {
				return idx.map(function (i) {
					return isNum(y[i]) ? y[i] : null;
				});
			})
		};
	}

	/* ---- marks: the peak, the leak's start, OOM, alerts and events as vertical lines -------- */

	function textOr(s) {
		return typeof s === 'string' ? s : 'n/a';
	}

	/* The marks: the peak, the leak's start and out-of-memory from the document; alerts and events
	 * from the page's own lists (#alerts, #events: each alert once, worded as the summary words it).
	 * An event that is an alert or out-of-memory is marked once, as such. */
	function collectMarks(doc) {
		var marks = [];
		function add(t, short, text, color, dash, row) {
			if (isNum(t))
				marks.push({t: t, short: short, text: text, color: color, dash: dash, row: row});
		}
		var peak = obj(doc.peak), leak = obj(doc.leak), oom = obj(doc.oom);
		if (peak)
			add(peak.time, 'peak', 'peak: ' + fmtBytes(peak.bytes), '#b3261e', [], 0);
		if (leak && leak.verdict === 'leak')
			add(leak.start_time, 'leak starts', 'leak starts' + (isNum(leak.start_step) ? ' at step ' + leak.start_step : ''),
			    '#d98c00', [6, 3], 1);
		if (oom)
			add(oom.time, 'OOM', 'out of memory' + (typeof oom.cause === 'string' ? ' (cause: ' + oom.cause + ')' : ''),
			    '#7a0010', [], 2);
		function listed(id, each) {
			var items = document.querySelectorAll('#' + id + ' li[data-t]');
			for (var i = 0; i < items.length; i++) {
				var li = items[i], kind = li.getAttribute('data-kind') || '';
				var text = li.querySelector('.text');
				each(Number(li.getAttribute('data-t')), kind, text ? text.textContent : '');
			}
		}
		listed('alerts', function (t, kind, text) {
			if (kind === 'oom' && oom)
				return; /* the OOM mark says it */
			add(t, kind === 'oom' ? 'OOM' : 'alert', (kind === 'oom' ? 'out of memory: ' : 'alert: ') + text,
			    '#c25e00', [2, 3], 3);
		});
		listed('events', function (t, kind, text) {
			if (kind !== 'alert' && kind !== 'oom')
				add(t, kind || 'event', (kind ? kind + ': ' : '') + text, '#444', [4, 4], 4);
		});
		return marks;
	}

	/* A uPlot plugin that draws the marks and names the one under the cursor in info (a <p>). */
	function marksPlugin(marks, info) {
		function draw(u) {
			var ctx = u.ctx, b = u.bbox;
			ctx.save();
			ctx.beginPath();
			ctx.rect(b.left, b.top, b.width, b.height);
			ctx.clip();
			ctx.font = Math.round(11 * DPR) + 'px sans-serif';
			ctx.lineWidth = DPR;
			var rowEnd = []; /* the right end of the last label of each row of labels */
			marks.forEach(function (m) {
				var x = Math.round(u.valToPos(m.t, 'x', true));
				if (x < b.left || x > b.left + b.width)
					return;
				ctx.strokeStyle = m.color;
				ctx.fillStyle = m.color;
				ctx.setLineDash(m.dash.map(function (d) {
					return d * DPR;
				}));
				ctx.beginPath();
				ctx.moveTo(x + 0.5, b.top);
				ctx.lineTo(x + 0.5, b.top + b.height);
				ctx.stroke();
				/* the label right of its line, or left of it near the right edge */
				var w = ctx.measureText(m.short).width;
				var lx = x + 3 * DPR + w > b.left + b.width ? x - 3 * DPR - w : x + 3 * DPR;
				var row = m.row;
				while (row < 8 && rowEnd[row] != null && rowEnd[row] > lx - 4 * DPR)
					row++;
				rowEnd[row] = lx + w;
				ctx.fillText(m.short, lx, b.top + (12 + 12 * row) * DPR);
			});
			ctx.restore();
		}
		function cursor(u) {
			var left = u.cursor.left;
			var near = [];
			if (left != null && left >= 0)
				marks.forEach(function (m) {
					if (Math.abs(u.valToPos(m.t, 'x') - left) <= 4)
						near.push(fmtClock(m.t) + ' ' + m.text);
				});
			info.textContent = near.join(' \u00b7 ');
		}
		return {hooks: {draw: draw, setCursor: cursor}};
	}

	/* ---- zoom and pan shared by every time chart -------------------------------------------- */

	var timeCharts = [];
	var syncing = false;

	function syncScale(u, key) {
		if (key !== 'x' || syncing)
			return;
		syncing = true;
		timeCharts.forEach(function (c) {
			if (c !== u)
				c.setScale('x', {min: u.scales.x.min, max: u.scales.x.max});
		});
		syncing = false;
	}

	/* The x range on the chart's element (data-x-min, data-x-max), for scripts that read the page. */
	function showScale(u, key) {
		if (key !== 'x' || !u.root)
			return;
		u.root.setAttribute('data-x-min', String(u.scales.x.min));
		u.root.setAttribute('data-x-max', String(u.scales.x.max));
	}

	/* Mouse wheel zooms around the cursor; shift-drag or middle-drag pans. */
	function wheelPanPlugin() {
		function init(u) {
			u.over.addEventListener('wheel', function (e) {
				e.preventDefault();
				var min = u.scales.x.min, max = u.scales.x.max;
				if (!isNum(min) || !isNum(max))
					return;
				var x = u.posToVal(e.clientX - u.over.getBoundingClientRect().left, 'x');
				var f = e.deltaY < 0 ? 0.8 : 1.25;
				u.setScale('x', {min: x - (x - min) * f, max: x + (max - x) * f});
			}, {passive: false});
			u.root.addEventListener('mousedown', function (e) {
				if (!(e.shiftKey && e.button === 0) && e.button !== 1)
					return;
				if (!u.over.contains(e.target))
					return;
				e.preventDefault();
				e.stopPropagation();
				var x0 = e.clientX, min0 = u.scales.x.min, max0 = u.scales.x.max;
				var perPx = (max0 - min0) / (u.bbox.width / DPR);
				function move(ev) {
					var dv = (ev.clientX - x0) * perPx;
					u.setScale('x', {min: min0 - dv, max: max0 - dv});
				}
				function up() {
					document.removeEventListener('mousemove', move);
					document.removeEventListener('mouseup', up);
				}
				document.addEventListener('mousemove', move);
				document.addEventListener('mouseup', up);
			}, true);
		}
		return {hooks: {init: init}};
	}

	/* ---- building charts -------------------------------------------------------------------- */

	var BYTE_INCRS = [];
	[1, 1024, 1048576, 1073741824, 1099511627776, 1125899906842624].forEach(function (unit) {
		[1, 2, 5, 10, 20, 50, 100, 200, 500].forEach(function (m) {
			BYTE_INCRS.push(m * unit);
		});
	});
	var TIME_INCRS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300,
			  600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];
	var STEP_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000,
			  200000, 500000, 1000000];

	var chartsEl = document.getElementById('charts');
	var all = [];

	function chartWidth() {
		return Math.max(320, (chartsEl.clientWidth || 900) - 4);
	}

	/*
	 * A chart box in #charts (or parent): a heading (text), optional controls, the chart and a line
	 * naming the mark under the cursor. Returns {box, body, info}.
	 */
	function chartBox(title, detail, many, parent) {
		var box = document.createElement('div');
		box.className = 'chart' + (many ? ' many' : '');
		var h = document.createElement('h3');
		h.textContent = title;
		if (detail) {
			var d = document.createElement('span');
			d.className = 'dim';
			d.textContent = ' ' + detail;
			h.appendChild(d);
		}
		box.appendChild(h);
		var body = document.createElement('div');
		box.appendChild(body);
		var info = document.createElement('p');
		info.className = 'hint markinfo';
		box.appendChild(info);
		(parent || chartsEl).appendChild(box);
		return {box: box, body: body, info: info};
	}

	/*
	 * Draws one uPlot chart of memory over x. series: [{label, stroke, dash, fill, width, value}]
	 * (value(i) gives the legend figure at data index i when it differs from the drawn one).
	 * byStep: x is the step number instead of the time (then the chart zooms on its own).
	 */
	function isolated(u, si) {
		var y = u.data[si], idx = u.series[0].idxs || [0, y.length - 1], out = [];
		for (var i = Math.max(0, idx[0]); i <= idx[1] && i < y.length; i++)
			if (y[i] != null && (i === 0 || y[i - 1] == null) && (i === y.length - 1 || y[i + 1] == null))
				out.push(i);
		return out;
	}

	function memoryChart(where, x, ys, series, opts) {
		var byStep = !!opts.byStep;
		/* NVML's figures are change-only: each value holds until the next, so the GPUs' and the
		 * processes' lines are steps (a process that never changed is a flat line to the end);
		 * the framework's figures are samples, joined by straight lines */
		var paths = opts.linear ? uPlot.paths.linear() : uPlot.paths.stepped({align: 1});
		var s = [{
			label: byStep ? 'step' : 'time',
			value: function (u, v) {
				return v == null ? '--' : byStep ? String(v) : fmtClock(v, 3);
			}
		}];
		series.forEach(function (d) {
			s.push({
				label: d.label,
				show: d.show !== false,
				stroke: d.stroke,
				width: d.width || 1.5,
				dash: d.dash,
				fill: d.fill,
				paths: paths,
				spanGaps: false,
				/* a sample with gaps on both sides draws no line: show it as a dot */
				points: {show: true, size: 5, filter: isolated},
				value: function (u, v, si, di) {
					if (d.value)
						return di == null ? '--' : fmtBytes(d.value(di));
					return v == null ? '--' : fmtBytes(v);
				}
			});
		});
		var plugins = [wheelPanPlugin()];
		if (!byStep)
			plugins.push(marksPlugin(opts.marks, where.info));
		var u = new uPlot({
			width: chartWidth(),
			height: opts.height || 260,
			plugins: plugins,
			cursor: {
				sync: byStep ? undefined : {key: 'gpumon', setSeries: false},
				drag: {x: true, y: false},
				bind: {
					/* a double-click shows the whole run on every time chart */
					dblclick: function (self, target, handler) {
						return function (e) {
							if (byStep)
								return handler(e);
							timeCharts.forEach(function (c) {
								c.setScale('x', {min: opts.range[0], max: opts.range[1]});
							});
							return null;
						};
					}
				}
			},
			scales: {
				/* uPlot ranges x through this on every change, zooms included: keep what it is given */
				x: {
					time: false,
					range: function (self, min, max) {
						return min === max ? [min - 1, max + 1] : [min, max];
					}
				},
				y: {
					range: function (self, min, max) {
						var top = isNum(max) && max > 0 ? max * 1.06 : 1024;
						return [Math.min(0, isNum(min) ? min : 0), top];
					}
				}
			},
			axes: [{
				incrs: byStep ? STEP_INCRS : TIME_INCRS,
				values: function (self, splits, ax, space, incr) {
					return splits.map(function (v) {
						return byStep ? String(v) : fmtClock(v, incr < 0.01 ? 3 : incr < 0.1 ? 2 : incr < 1 ? 1 : 0);
					});
				}
			}, {
				size: 72,
				incrs: BYTE_INCRS,
				values: function (self, splits) {
					return splits.map(fmtBytesAxis);
				}
			}],
			series: s,
			hooks: {setScale: byStep ? [showScale] : [showScale, syncScale]}
		}, [x].concat(ys), where.body);
		u.root.setAttribute('data-x-axis', byStep ? 'step' : 'time');
		all.push(u);
		if (!byStep) {
			/* every time chart starts on the whole run, whatever its own samples cover */
			timeCharts.push(u);
			u.setScale('x', {min: opts.range[0], max: opts.range[1]});
		}
		showScale(u, 'x');
		return u;
	}

	function deviceChart(d, marks, range) {
		var c = cleanSeries(d.t, [d.used, d.used_max, d.reserved]);
		if (!c.x.length)
			return false;
		var total = c.x.map(function () {
			return isNum(d.total_bytes) ? d.total_bytes : null;
		});
		var where = chartBox('GPU ' + (isNum(d.dev) ? d.dev : 'n/a') + ': memory of the GPU',
				     '(NVML: used, the exact peak between samples, reserved by the driver, total)');
		/* the total line only from the start when the run came near it: otherwise it squeezes
		 * the used line flat (a click on its legend entry shows it) */
		var top = Math.max(peakOf(c.ys[0]), peakOf(c.ys[1]));
		var showTotal = !isNum(d.total_bytes) || top >= 0.5 * d.total_bytes;
		memoryChart(where, c.x, [c.ys[0], c.ys[1], c.ys[2], total], [
			{label: 'used', stroke: '#1f5fbf', width: 2},
			{label: 'used, exact peak', stroke: '#1f5fbf', dash: [4, 3], width: 1},
			{label: 'reserved by driver', stroke: '#8e44ad', dash: [2, 2]},
			{label: 'total', stroke: '#666', dash: [8, 4], width: 1, show: showTotal}
		], {marks: marks, range: range});
		return true;
	}

	/* The x grid of the stacked chart: every sample time of every process, or 4,000 even buckets
	 * over them when there are more (each bucket then shows its largest value). */
	function makeGrid(xs) {
		var n = 0;
		xs.forEach(function (x) {
			n += x.length;
		});
		var all_t = new Float64Array(n), k = 0;
		xs.forEach(function (x) {
			for (var i = 0; i < x.length; i++)
				all_t[k++] = x[i];
		});
		all_t.sort();
		var grid = [];
		for (var i = 0; i < n; i++)
			if (i === 0 || all_t[i] !== all_t[i - 1])
				grid.push(all_t[i]);
		var MAX = 4000;
		if (grid.length <= MAX)
			return grid;
		var lo = grid[0], hi = grid[grid.length - 1], out = [];
		for (var b = 0; b < MAX; b++)
			out.push(lo + (hi - lo) * b / MAX);
		return out;
	}

	/* One process's values on the grid: the largest of its samples in each cell; the last value
	 * held through cells without a sample, between its first and last sample; null elsewhere. */
	function resample(x, y, grid) {
		var out = new Array(grid.length), j = 0, n = x.length, last = null;
		for (var k = 0; k < grid.length; k++) {
			var hi = k + 1 < grid.length ? grid[k + 1] : Infinity, m = null, any = false;
			while (j < n && x[j] < hi) {
				any = true;
				if (y[j] != null)
					m = m == null ? y[j] : Math.max(m, y[j]);
				last = y[j];
				j++;
			}
			if (any)
				out[k] = m;
			else
				out[k] = n && grid[k] >= x[0] && grid[k] <= x[n - 1] ? last : null;
		}
		return out;
	}

	function peakOf(y) {
		var m = -Infinity;
		for (var i = 0; i < y.length; i++)
			if (y[i] != null && y[i] > m)
				m = y[i];
		return m;
	}

	/* "pid 4242 alice python train.py (pod ml-team/trainer-0)", its parts left out when unknown; "the process" when the
	 * document names no pid (a CSV's). */
	function processName(p) {
		var parts = [isNum(p.pid) ? 'pid ' + p.pid : 'the process'];
		if (typeof p.user === 'string')
			parts.push(p.user);
		if (typeof p.command === 'string')
			parts.push(p.command);
		if (typeof p.owner === 'string') /* the library's phrase: "pod ml-team/trainer-0" */
			parts.push('(' + p.owner + ')');
		return parts.join(' ');
	}

	/* The processes of one GPU, stacked: the job's at the bottom in blues, the others above in
	 * oranges with dashed edges; the legend shows each process's own figure. */
	function processChart(dev, procs, marks, range) {
		procs = procs.map(function (p) {
			var c = cleanSeries(p.t, [p.used]);
			return {p: p, x: c.x, y: c.ys[0], job: p.job === true, peak: peakOf(c.ys[0])};
		}).filter(function (q) {
			return q.x.length > 0;
		});
		if (!procs.length)
			return false;
		procs.sort(function (a, b) {
			return (b.job - a.job) || (b.peak - a.peak);
		});
		var grid = makeGrid(procs.map(function (q) {
			return q.x;
		}));
		var raw = procs.map(function (q) {
			return resample(q.x, q.y, grid);
		});
		var run = new Float64Array(grid.length);
		var cum = raw.map(function (r) {
			return r.map(function (v, k) {
				if (v == null)
					return null;
				run[k] += v;
				return run[k];
			});
		});
		var njob = procs.filter(function (q) {
			return q.job;
		}).length;
		var series = [], ys = [];
		/* drawn top of the stack first, so that each lower band paints over the one above */
		for (var i = procs.length - 1; i >= 0; i--) {
			var q = procs[i], pos = q.job ? i : i - njob;
			var hue = q.job ? 205 + (pos * 37) % 60 : 18 + (pos * 23) % 40;
			var light = 78 - (pos % 4) * 7;
			var label = (q.job ? 'job ' : 'other ') + processName(q.p);
			series.push({
				label: label,
				stroke: 'hsl(' + hue + ',60%,' + (light - 35) + '%)',
				fill: 'hsl(' + hue + ',65%,' + light + '%)',
				dash: q.job ? undefined : [5, 3],
				width: 1,
				value: (function (r) {
					return function (di) {
						return r[di];
					};
				})(raw[i])
			});
			ys.push(cum[i]);
		}
		var where = chartBox('GPU ' + (isNum(dev) ? dev : 'n/a') + ': memory of each process, stacked',
				     '(' + njob + ' of the job, ' + (procs.length - njob) + ' other; legend figures are each process\'s own)',
				     procs.length > 8);
		memoryChart(where, grid, ys, series, {marks: marks, range: range, height: 300});
		return true;
	}

	/* The verdict on framework source f's segment, from the document's series, or null. */
	function segmentVerdict(doc, f) {
		var found = null;
		arr(doc.series).forEach(function (v) {
			var s = obj(v) && obj(v.series);
			if (s && s.kind === 'framework' && s.pid === f.pid && s.device === f.device && s.segment === f.segment)
				found = v;
		});
		return found;
	}

	function frameworkChart(f, marks, range, leak) {
		var title = (typeof f.framework === 'string' ? f.framework : 'framework') + ', ' +
			    (isNum(f.pid) ? 'pid ' + f.pid : 'the process') + (isNum(f.device) ? ', device ' + f.device : '') +
			    (isNum(f.segment) && f.segment > 0 ? ', loop restart ' + f.segment : '') + ': the allocator';
		var hasStep = arr(f.step).some(isNum);
		var hasTime = cleanSeries(f.t, []).x.length > 0;
		if (!hasTime && !hasStep)
			return false;
		var where = chartBox(title, '(allocated, reserved by the allocator, highest allocated)');
		var lines = [
			{label: 'allocated', stroke: '#1e7b34', width: 2},
			{label: 'reserved', stroke: '#d98c00'},
			{label: 'max allocated', stroke: '#b3261e', dash: [4, 3], width: 1}
		];
		var holder = document.createElement('div');
		var chart = null;
		function draw(byStep) {
			var c = cleanSeries(byStep ? f.step : f.t, [f.allocated, f.reserved, f.max_allocated]);
			if (chart) {
				all.splice(all.indexOf(chart), 1);
				var ti = timeCharts.indexOf(chart);
				if (ti >= 0)
					timeCharts.splice(ti, 1);
				chart.destroy();
			}
			chart = memoryChart({body: holder, info: where.info}, c.x, c.ys, lines,
					    {marks: marks, range: range, byStep: byStep, linear: true});
			if (!byStep && timeCharts.length > 1) {
				var other = timeCharts[0] === chart ? timeCharts[1] : timeCharts[0];
				chart.setScale('x', {min: other.scales.x.min, max: other.scales.x.max});
			}
		}
		if (hasStep && hasTime) {
			var p = document.createElement('p');
			p.className = 'controls';
			var lab = document.createElement('label');
			lab.textContent = 'x axis: ';
			var sel = document.createElement('select');
			[['time', 'time'], ['step', 'step']].forEach(function (o) {
				var opt = document.createElement('option');
				opt.value = o[0];
				opt.textContent = o[1];
				sel.appendChild(opt);
			});
			sel.addEventListener('change', function () {
				draw(sel.value === 'step');
			});
			lab.appendChild(sel);
			p.appendChild(lab);
			if (leak && leak.verdict === 'leak' && isNum(leak.start_step))
				p.appendChild(document.createTextNode(' (the leak starts at step ' + leak.start_step + ')'));
			where.box.insertBefore(p, where.body);
		}
		where.body.appendChild(holder);
		draw(!hasTime);
		return true;
	}

	/* ---- the ranks of a distributed job: one line each, on the shared time axis ------------- */

	var RANK_COLORS = ['#1f5fbf', '#2a9d8f', '#6a4c93', '#3d7a3d', '#4b6584', '#8e44ad', '#117a8b', '#5e81ac',
			   '#7a6a00', '#2e86de', '#1b4f72', '#6c757d', '#16a085', '#9b59b6', '#34495e', '#27ae60'];
	var MANY_RANKS = 16;

	/* "rank 3", "rank 3 GPU 2" when the rank has several rows (a worker on several GPUs). */
	function rankName(r, rowsOf) {
		var name = 'rank ' + (isNum(r.rank) ? r.rank : 'n/a');
		return rowsOf[r.rank] > 1 ? name + ' GPU ' + (isNum(r.dev) ? r.dev : 'n/a') : name;
	}

	/* The note under the rank chart naming the ranks whose process has no timeline in the document. */
	function ranksUndrawn(el, missing, rowsOf) {
		if (!missing.length)
			return;
		var p = document.createElement('p');
		p.className = 'warn';
		p.id = 'ranks-undrawn';
		var names = missing.slice(0, 12).map(function (r) {
			return rankName(r, rowsOf) + ' (pid ' + (isNum(r.pid) ? r.pid : 'n/a') + ' on GPU ' +
			       (isNum(r.dev) ? r.dev : 'n/a') + ')';
		});
		if (missing.length > 12)
			names.push('and ' + (missing.length - 12) + ' more');
		p.textContent = 'Not drawn: this document has no timeline of the process of ' + names.join(', ') + '.';
		el.appendChild(p);
	}

	/*
	 * Each rank's memory (its process's NVML figure) as a line of its own in #rank-chart. The rank
	 * that leaks and the one that ran out of memory are drawn thick in their own colours and say so
	 * in the legend ("rank 3 (leak)", "rank 5 (ran out)"); past MANY_RANKS ranks the others are thin
	 * and pale, and the lowest and highest peak are highlighted too. A rank whose process has no
	 * timeline in the document is named under the chart.
	 */
	function rankChart(doc, tl, marks, range) {
		var el = document.getElementById('rank-chart');
		var ranks = arr(doc.ranks).filter(function (r) {
			return obj(r);
		});
		if (!el || !ranks.length)
			return false;
		var procs = {};
		arr(tl && tl.processes).forEach(function (p) {
			if (obj(p) && isNum(p.dev) && isNum(p.pid))
				procs[p.dev + ':' + p.pid] = p;
		});
		var rowsOf = {};
		ranks.forEach(function (r) {
			rowsOf[r.rank] = (rowsOf[r.rank] || 0) + 1;
		});
		var skew = obj(doc.rank_skew) || {};
		var many = ranks.length > MANY_RANKS;
		var lines = [], missing = [];
		ranks.forEach(function (r) {
			var p = procs[r.dev + ':' + r.pid];
			var c = p ? cleanSeries(p.t, [p.used]) : {x: [], ys: [[]]};
			if (!c.x.length) {
				missing.push(r);
				return;
			}
			var tags = [], color = null;
			if (r.oom === true) {
				tags.push('ran out');
				color = '#b3261e';
			}
			if (obj(r.leak) && r.leak.verdict === 'leak') {
				tags.unshift('leak');
				color = color || '#d98c00';
			}
			if (many && r.rank === skew.peak_max_rank) {
				tags.push('highest peak');
				color = color || '#6a1b9a';
			}
			if (many && r.rank === skew.peak_min_rank) {
				tags.push('lowest peak');
				color = color || '#1e7b34';
			}
			lines.push({r: r, x: c.x, y: c.ys[0], mark: color != null, color: color,
				    label: rankName(r, rowsOf) + (tags.length ? ' (' + tags.join(', ') + ')' : '')});
		});
		if (!lines.length) {
			var none = document.createElement('p');
			none.className = 'empty';
			none.textContent = tl === null ? 'This report has no timeline to draw.' :
					   'No rank\'s process has a timeline in this document.';
			el.appendChild(none);
			ranksUndrawn(el, tl === null ? [] : missing, rowsOf);
			return false;
		}
		/* past MANY_RANKS, the highlighted ones last: drawn over the thin ones */
		if (many)
			lines = lines.filter(function (q) {
				return !q.mark;
			}).concat(lines.filter(function (q) {
				return q.mark;
			}));
		var grid = makeGrid(lines.map(function (q) {
			return q.x;
		}));
		var plain = 0, marked = lines.filter(function (q) {
			return q.mark;
		}).length;
		var series = lines.map(function (q) {
			var thick = q.mark;
			var stroke = q.color || (many ? 'rgba(31,95,191,0.35)' : RANK_COLORS[plain++ % RANK_COLORS.length]);
			return {label: q.label, stroke: stroke, width: thick ? 2.5 : many ? 1 : 1.5};
		});
		var detail = many ? '(NVML: all ' + lines.length + ' ranks with a timeline drawn thin, ' + marked +
				    ' highlighted: the leak, the one that ran out, the lowest and highest peak)'
				  : '(NVML: ' + lines.length + ' rank' + (lines.length === 1 ? '' : 's') + ' drawn, one line each)';
		var where = chartBox('Memory of each rank\'s process', detail, many, el);
		where.box.id = 'rank-chart-box';
		where.box.setAttribute('data-ranks-drawn', String(lines.length));
		where.box.setAttribute('data-ranks-highlighted', String(marked));
		memoryChart(where, grid, lines.map(function (q) {
			return resample(q.x, q.y, grid);
		}), series, {marks: marks, range: range, height: 300});
		ranksUndrawn(el, missing, rowsOf);
		return true;
	}

	/* The x range every time chart starts with: from 0 (or the first sample) to the end. */
	function timeRange(doc, tl, marks) {
		var lo = 0, hi = -Infinity;
		function scan(t) {
			arr(t).forEach(function (v) {
				if (isNum(v)) {
					if (v < lo)
						lo = v;
					if (v > hi)
						hi = v;
				}
			});
		}
		arr(tl.devices).forEach(function (d) {
			scan(obj(d) && d.t);
		});
		arr(tl.processes).forEach(function (p) {
			scan(obj(p) && p.t);
		});
		arr(tl.framework).forEach(function (f) {
			scan(obj(f) && f.t);
		});
		var src = obj(doc.source);
		if (src && isNum(src.duration_s) && src.duration_s > hi)
			hi = src.duration_s;
		marks.forEach(function (m) {
			if (m.t > hi)
				hi = m.t;
		});
		if (!isNum(hi) || hi <= lo)
			hi = lo + 1;
		return [lo, hi];
	}

	function main() {
		var doc = readDocument();
		var tl = obj(doc.timeline) || {};
		var marks = collectMarks(doc);
		var range = timeRange(doc, tl, marks);
		var n = 0;

		if (rankChart(doc, obj(doc.timeline), marks, range))
			n++;

		arr(tl.devices).forEach(function (d) {
			if (obj(d) && deviceChart(d, marks, range))
				n++;
		});
		var byDev = {}, devOrder = [];
		arr(tl.processes).forEach(function (p) {
			if (!obj(p))
				return;
			var key = isNum(p.dev) ? String(p.dev) : 'n/a';
			if (!byDev[key]) {
				byDev[key] = [];
				devOrder.push(key);
			}
			byDev[key].push(p);
		});
		devOrder.forEach(function (key) {
			if (processChart(key === 'n/a' ? null : Number(key), byDev[key], marks, range))
				n++;
		});
		arr(tl.framework).forEach(function (f) {
			if (obj(f) && frameworkChart(f, marks, range, segmentVerdict(doc, f)))
				n++;
		});
		if (n === 0) {
			var p = document.createElement('p');
			p.className = 'empty';
			p.textContent = 'This report has no timeline to draw.';
			chartsEl.appendChild(p);
		}

		var pending = null;
		window.addEventListener('resize', function () {
			clearTimeout(pending);
			pending = setTimeout(function () {
				all.forEach(function (u) {
					u.setSize({width: chartWidth(), height: u.height});
				});
			}, 100);
		});
		root.setAttribute('data-gpumon-charts', String(n));
	}

	try {
		var t0 = performance.now();
		main();
		/* how long drawing took, for docs/report-html.md's figures */
		root.setAttribute('data-gpumon-draw-ms', String(Math.round(performance.now() - t0)));
		root.setAttribute('data-gpumon-state', 'ready');
	} catch (e) {
		root.setAttribute('data-gpumon-state', 'failed');
		if (window.gpumonError)
			window.gpumonError('the timelines could not be drawn: ' + (e && e.message ? e.message : e));
		else
			throw e;
	}
})();
