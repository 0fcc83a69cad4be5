// Build step for /docs (`npm run build:docs`; run by `npm install`, `npm test` and `npm start`
// first): copies Swagger UI's standalone bundle from node_modules/swagger-ui-dist, and Loom's own
// starter script, into public/docs/ (not committed), the directory wrangler.toml's [assets]
// serves. The renderer is never vendored into the repository; it comes from the pinned package.
import { copyFileSync, mkdirSync, rmSync } from "node:fs";

const root = new URL("../", import.meta.url);
const out = new URL("public/docs/", root);
rmSync(out, { recursive: true, force: true });
mkdirSync(new URL("vendor/", out), { recursive: true });

const vendor = ["swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE", "favicon-32x32.png"];
for (const file of vendor)
  copyFileSync(new URL(`node_modules/swagger-ui-dist/${file}`, root), new URL(`vendor/${file}`, out));
copyFileSync(new URL("src/features/docs/browser/loom-docs.js", root), new URL("loom-docs.js", out));
console.log("copied Swagger UI into public/docs");
