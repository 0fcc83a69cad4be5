// Workers import a .wasm file as an already compiled WebAssembly.Module (never compiled at run time).
declare module "*.wasm" {
  const module: WebAssembly.Module;
  export default module;
}
