/**
 * The /docs page: Swagger UI, a well-kept OpenAPI renderer, that follows `$ref`, fills example
 * bodies from the schemas and sends requests with the key given in "Authorize". Its script and
 * stylesheet are static assets on Loom's own origin (no CDN, so it works offline), and the page
 * has no inline script or style, so it runs under a strict Content-Security-Policy.
 */
export const DOCS_ASSETS = [
  "/docs/vendor/swagger-ui.css",
  "/docs/vendor/swagger-ui-bundle.js",
  "/docs/loom-docs.js",
] as const;

export const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Loom API reference</title>
<link rel="icon" type="image/png" href="/docs/vendor/favicon-32x32.png">
<link rel="stylesheet" href="${DOCS_ASSETS[0]}">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${DOCS_ASSETS[1]}"></script>
<script src="${DOCS_ASSETS[2]}"></script>
</body>
</html>`;
