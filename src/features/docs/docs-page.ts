/**
 * An interactive API reference served at /docs. It is self-contained (no CDN), so it works on a
 * laptop with no network: it reads /openapi.json, lists every operation by tag, and lets the
 * reader fill in parameters and a body and send the request with their own credential.
 */
/** The page's only style sheet, inline; the page policy allows it by its hash. */
export const DOCS_STYLE = `
  :root { --ink: #1d2330; --muted: #5b6577; --line: #d9dee7; --bg: #f6f7f9; --accent: #3451b2; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.5 system-ui, -apple-system, Segoe UI, sans-serif; color: var(--ink); background: var(--bg); }
  header { padding: 16px 24px; background: #fff; border-bottom: 1px solid var(--line); display: flex; gap: 16px; align-items: center; flex-wrap: wrap; }
  header h1 { font-size: 18px; margin: 0; }
  header input { flex: 1; min-width: 260px; padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; font-family: ui-monospace, monospace; }
  main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 64px; }
  h2 { font-size: 15px; margin: 28px 0 8px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
  details { background: #fff; border: 1px solid var(--line); border-radius: 8px; margin: 6px 0; }
  summary { cursor: pointer; padding: 8px 12px; display: flex; gap: 12px; align-items: baseline; }
  .method { font: 600 12px ui-monospace, monospace; width: 56px; text-align: center; border-radius: 4px; padding: 2px 0; color: #fff; }
  .get { background: #2f855a; } .post { background: #3451b2; } .put { background: #b7791f; } .patch { background: #805ad5; } .delete { background: #c53030; }
  .path { font-family: ui-monospace, monospace; }
  .summary { color: var(--muted); }
  .body { padding: 0 12px 12px; }
  label { display: block; margin: 8px 0 2px; font-weight: 600; font-size: 12px; }
  label small { font-weight: 400; color: var(--muted); }
  input.param, textarea { width: 100%; padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; font-family: ui-monospace, monospace; font-size: 13px; }
  textarea { min-height: 120px; }
  button { margin-top: 10px; padding: 6px 14px; border: 0; border-radius: 6px; background: var(--accent); color: #fff; cursor: pointer; }
  pre { background: #0f1420; color: #d8dee9; padding: 10px; border-radius: 6px; overflow: auto; max-height: 420px; white-space: pre-wrap; }
  .schema { color: var(--muted); font-size: 12px; }
`;

/** The page's only script, inline; the page policy allows it by its hash (no 'unsafe-inline'). */
export const DOCS_SCRIPT = `
(function () {
  var credential = document.getElementById("credential");
  credential.value = sessionStorage.getItem("loom-credential") || "";
  credential.addEventListener("input", function () { sessionStorage.setItem("loom-credential", credential.value); });

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { if (k === "text") node.textContent = attrs[k]; else node.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) { node.appendChild(c); });
    return node;
  }

  function example(schema, depth) {
    if (!schema || depth > 4) return null;
    if (schema.example !== undefined) return schema.example;
    if (schema.default !== undefined) return schema.default;
    if (schema.enum) return schema.enum[0];
    if (schema.anyOf || schema.oneOf) return example((schema.anyOf || schema.oneOf)[0], depth + 1);
    switch (schema.type) {
      case "object":
        var out = {};
        Object.keys(schema.properties || {}).forEach(function (k) {
          if ((schema.required || []).indexOf(k) >= 0) out[k] = example(schema.properties[k], depth + 1);
        });
        return out;
      case "array": return [];
      case "integer": case "number": return schema.minimum !== undefined ? schema.minimum : 0;
      case "boolean": return false;
      default: return "";
    }
  }

  function operation(path, method, op) {
    var params = (op.parameters || []).map(function (p) {
      var input = el("input", { class: "param", "data-in": p.in, "data-name": p.name, placeholder: p.schema && p.schema.type || "" });
      return { spec: p, input: input, label: el("label", { text: p.name + " (" + p.in + (p.required ? ", required" : "") + ")" }) };
    });
    var content = op.requestBody && op.requestBody.content || {};
    var bodyType = Object.keys(content)[0];
    var textarea = null;
    var response = el("pre", { text: "" });
    var children = [];
    if (op.description) children.push(el("p", { text: op.description }));
    params.forEach(function (p) { children.push(p.label, p.input); });
    if (bodyType) {
      var schema = content[bodyType].schema;
      textarea = el("textarea", {});
      textarea.value = JSON.stringify(example(schema, 0), null, 2);
      children.push(el("label", {}, [document.createTextNode("JSON body "), el("small", { text: "(also accepted as " + Object.keys(content).join(", ") + ")" })]), textarea);
      children.push(el("pre", { class: "schema", text: JSON.stringify(schema, null, 2) }));
    }
    var send = el("button", { text: "Send request" });
    send.addEventListener("click", function () {
      var url = path;
      var query = new URLSearchParams();
      params.forEach(function (p) {
        if (!p.input.value) return;
        if (p.spec.in === "path") url = url.replace("{" + p.spec.name + "}", encodeURIComponent(p.input.value));
        if (p.spec.in === "query") query.append(p.spec.name, p.input.value);
      });
      var init = { method: method.toUpperCase(), headers: {} };
      if (credential.value) init.headers.authorization = "Bearer " + credential.value;
      if (textarea) { init.headers["content-type"] = "application/json"; init.body = textarea.value; }
      response.textContent = "…";
      fetch(url + (query.toString() ? "?" + query : ""), init).then(function (r) {
        return r.text().then(function (text) {
          var shown = text;
          try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch (e) {}
          response.textContent = r.status + " " + r.statusText + "\\n\\n" + shown;
        });
      }).catch(function (e) { response.textContent = String(e); });
    });
    children.push(send, response);
    return el("details", {}, [
      el("summary", {}, [el("span", { class: "method " + method, text: method.toUpperCase() }), el("span", { class: "path", text: path }), el("span", { class: "summary", text: op.summary || "" })]),
      el("div", { class: "body" }, children),
    ]);
  }

  fetch("/openapi.json").then(function (r) { return r.json(); }).then(function (doc) {
    var root = document.getElementById("root");
    root.innerHTML = "";
    root.appendChild(el("p", { text: doc.info.description || "" }));
    var byTag = {};
    Object.keys(doc.paths).sort().forEach(function (path) {
      Object.keys(doc.paths[path]).forEach(function (method) {
        var op = doc.paths[path][method];
        var tag = (op.tags && op.tags[0]) || "Other";
        (byTag[tag] = byTag[tag] || []).push(operation(path, method, op));
      });
    });
    Object.keys(byTag).sort().forEach(function (tag) {
      root.appendChild(el("h2", { text: tag }));
      byTag[tag].forEach(function (node) { root.appendChild(node); });
    });
  }).catch(function (e) { document.getElementById("root").textContent = "Could not load /openapi.json: " + e; });
})();
`;

export const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Loom API reference</title>
<style>${DOCS_STYLE}</style>
</head>
<body>
<header>
  <h1>Loom API</h1>
  <input id="credential" placeholder="Bearer credential: an API key (sk_...) for /v1, an access token or API key for the rest" autocomplete="off">
  <a href="/openapi.json">openapi.json</a>
</header>
<main id="root"><p>Loading the API description…</p></main>
<script>${DOCS_SCRIPT}</script>
</body>
</html>`;
