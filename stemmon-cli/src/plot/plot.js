"use strict";
// The hover read-out of `stemmon plot`: the chart's data (plot/model.rs) is the JSON in
// <script id="data">; the pointer's time picks the nearest point and the open stages.
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
  const mib = (v) => (v === null ? "-" : (v / 1048576).toFixed(1) + " MiB");
  const middle = (p) => (p.start + p.end) / 2;
  function hide() {
    readout.hidden = true;
    cursor.setAttribute("visibility", "hidden");
  }
  svg.addEventListener("mousemove", function (event) {
    const box = svg.getBoundingClientRect();
    const x = event.clientX - box.left;
    const t = ((x - data.left) / (data.right - data.left)) * data.duration;
    if (t < 0 || t > data.duration || data.points.length === 0) {
      hide();
      return;
    }
    let best = data.points[0];
    for (const p of data.points) {
      if (Math.abs(middle(p) - t) < Math.abs(middle(best) - t)) best = p;
    }
    const stages = data.bands.filter((b) => b.start <= t && t <= b.end).map((b) => b.path);
    // textContent, never innerHTML: stage names are a report's text, shown as they are.
    readout.textContent =
      "t = " + best.start.toFixed(2) + " s" +
      "\ntree " + mib(best.tree) +
      "\nparent " + mib(best.parent) +
      "\nchildren " + mib(best.children) +
      "\nbound " + mib(best.bound) +
      (best.heap === null ? "" : "\nlive heap " + mib(best.heap)) +
      (best.cpu === null ? "" : "\nCPU " + best.cpu.toFixed(2) + " cores") +
      "\nstage " + (stages.length ? stages.join(", ") : "workflow");
    readout.style.left = Math.min(x + 14, box.width - 180) + "px";
    readout.style.top = event.clientY - box.top + 14 + "px";
    readout.hidden = false;
    cursor.setAttribute("x1", x);
    cursor.setAttribute("x2", x);
    cursor.setAttribute("visibility", "visible");
  });
  svg.addEventListener("mouseleave", hide);
  document.body.dataset.ready = String(data.points.length);
})();
