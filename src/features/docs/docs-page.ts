/** Placeholder replaced by the interactive reference page. */
export const DOCS_PAGE = "<!doctype html><title>Loom API</title><p>See <a href=\"/openapi.json\">/openapi.json</a>.</p>";
