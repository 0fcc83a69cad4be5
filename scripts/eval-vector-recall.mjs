// `npm run eval:vector-recall`: bundles scripts/eval-vector-recall-run.mjs (and the TypeScript it imports) with esbuild (the kernel's
// .wasm loaded as a compiled module, as Workers import it) and runs it on Node.
import { build } from "esbuild";
import { execFileSync } from "node:child_process";

const outfile = ".wrangler/eval-vector-recall.mjs";
await build({
  entryPoints: ["scripts/eval-vector-recall-run.mjs"],
  bundle: true,
  platform: "node",
  format: "esm",
  outfile,
  logLevel: "warning",
  plugins: [
    {
      name: "wasm-module",
      setup(b) {
        b.onLoad({ filter: /\.wasm$/ }, (args) => ({
          contents: `import { readFileSync } from "node:fs"; export default new WebAssembly.Module(readFileSync(${JSON.stringify(args.path)}));`,
          loader: "js",
        }));
      },
    },
  ],
});
execFileSync(process.execPath, [outfile], { stdio: "inherit", env: process.env });
