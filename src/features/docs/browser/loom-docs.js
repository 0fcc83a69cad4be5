// Starts Swagger UI on /docs from Loom's own /openapi.json. A separate file (not an inline
// script) so the page runs under a strict Content-Security-Policy; Swagger UI's bundle is served
// from the same origin, so the reference works offline.
/* global SwaggerUIBundle */
window.addEventListener("DOMContentLoaded", () => {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    // "Try it out" is open at once: the example bodies are filled from the schemas.
    tryItOutEnabled: true,
    // The credential typed in "Authorize" survives a reload of the page (sessionStorage-like).
    persistAuthorization: true,
    displayRequestDuration: true,
    defaultModelsExpandDepth: 0,
    docExpansion: "list",
    // No external validator badge: it would call out to a third-party host.
    validatorUrl: null,
  });
});
