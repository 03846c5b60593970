"use strict";
// The hover read-out of `stemmon plot`: the chart's data (plot/model.rs) is the JSON in
// <script id="data">. At the pointer's time each series shows the step the picture draws
// there (data.series: [from, to, value, point] each), so the read-out and the lines agree.
// `page.html#t=1.5` opens with the read-out at 1.5 s.
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const svg = document.getElementById("chart");
  const readout = document.getElementById("readout");
  const cursor = document.createElementNS("http://www.w3.org/2000/svg", "line");
  cursor.setAttribute("stroke", "#555");
  cursor.setAttribute("visibility", "hidden");
  cursor.setAttribute("y1", "0");
  cursor.setAttribute("y2", svg.getAttribute("height"));
  svg.appendChild(cursor);
  const mib = (v) => (v === null || v === undefined ? "-" : (v / 1048576).toFixed(1) + " MiB");
  const s = (t) => t.toFixed(2) + " s";
  // The step drawn at `t`: the last one starting at or before it, if it reaches `t`.
  function at(steps, t) {
    let low = 0;
    let high = steps.length - 1;
    let found = null;
    while (low <= high) {
      const mid = (low + high) >> 1;
      if (steps[mid][0] <= t) {
        found = steps[mid];
        low = mid + 1;
      } else {
        high = mid - 1;
      }
    }
    return found !== null && t <= found[1] ? found : null;
  }
  // Where a sampled figure was read: its point's one instant, the span it is the maximum
  // of, or (a step between two points) the lower of the readings either side.
  function read(step) {
    const p = data.points[step[3]];
    if (step[0] !== p.start || step[1] !== p.end) {
      return " (no reading " + s(step[0]) + "–" + s(step[1]) + ": the lower one either side)";
    }
    return p.end > p.start ? " (max over " + s(p.start) + "–" + s(p.end) + ")" : " (read at " + s(p.start) + ")";
  }
  // A figure of a unit panel (plot/panel.rs) by its unit's name.
  function figure(unit, v) {
    if (unit === "share") return (v * 100).toFixed(1) + "%";
    if (unit === "count") return String(Math.round(v));
    if (unit === "seconds") return v.toFixed(2) + " s";
    if (unit === "cores") return v.toFixed(2) + " cores";
    return String(v);
  }
  function over(step) {
    return " (over " + s(step[0]) + "–" + s(step[1]) + ")";
  }
  function text(t) {
    const lines = ["t = " + s(t)];
    const tree = at(data.series.tree, t);
    lines.push("tree " + (tree ? mib(tree[2]) + read(tree) : "-"));
    const stacked = at(data.series.stacked, t);
    const point = stacked ? data.points[stacked[3]] : null;
    lines.push("parent " + mib(point && point.parent));
    lines.push("children " + mib(point && point.children));
    const bound = at(data.series.bound, t);
    lines.push("bound " + (bound ? mib(bound[2]) + over(bound) : "-"));
    for (const line of data.series.lines) {
      const step = at(line.steps, t);
      if (step) lines.push(line.name + " " + mib(step[2]) + read(step));
    }
    const cpu = at(data.series.cpu, t);
    if (cpu) lines.push("CPU " + cpu[2].toFixed(2) + " cores" + over(cpu));
    for (const panel of data.series.panels || []) {
      for (const line of panel.lines) {
        const step = at(line.steps, t);
        if (step) lines.push(line.name + " " + figure(panel.unit, step[2]) + read(step));
      }
    }
    const stages = data.bands.filter((b) => b.start <= t && t <= b.end).map((b) => b.path);
    lines.push("stage " + (stages.length ? stages.join(", ") : "workflow"));
    return lines.join("\n");
  }
  function hide() {
    readout.hidden = true;
    cursor.setAttribute("visibility", "hidden");
  }
  function show(t, x, y, width) {
    // textContent, never innerHTML: stage names are a report's text, shown as they are.
    readout.textContent = text(t);
    readout.style.left = Math.min(x + 14, width - 260) + "px";
    readout.style.top = y + 14 + "px";
    readout.hidden = false;
    cursor.setAttribute("x1", x);
    cursor.setAttribute("x2", x);
    cursor.setAttribute("visibility", "visible");
  }
  svg.addEventListener("mousemove", function (event) {
    const box = svg.getBoundingClientRect();
    const x = event.clientX - box.left;
    const t = ((x - data.left) / (data.right - data.left)) * data.duration;
    if (t < 0 || t > data.duration || data.points.length === 0) {
      hide();
      return;
    }
    show(t, x, event.clientY - box.top, box.width);
  });
  svg.addEventListener("mouseleave", hide);
  const hash = /^#t=([0-9.]+)$/.exec(window.location.hash);
  if (hash && data.points.length > 0) {
    const t = Math.min(Number(hash[1]), data.duration);
    show(t, data.left + (t / data.duration) * (data.right - data.left), 60, svg.getBoundingClientRect().width);
  }
  document.body.dataset.ready = String(data.points.length);
})();
