// Binary files imported as modules: wrangler.toml's `[[rules]] type = "Data"` hands them over as an
// ArrayBuffer (src/providers/generated/static-use.bin, the offline embedding table).
declare module "*.bin" {
  const data: ArrayBuffer;
  export default data;
}
