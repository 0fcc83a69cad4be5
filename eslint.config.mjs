// ESLint runs only the checks Biome cannot make: those that need TypeScript's types. Biome
// (biome.json) does formatting and every other lint rule; `npm run lint` runs both.
import tseslint from "typescript-eslint";

export default [
  // test-client/ is compiled by its own test against types generated at test time (not in any tsconfig).
  {
    ignores: [
      "test-client/**",
      "**/generated/**",
      "public/**",
      ".eval/**",
      ".wrangler/**",
      "node_modules/**",
      "**/*.js",
      "**/*.mjs",
    ],
  },
  {
    files: ["**/*.ts"],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        // Files outside every tsconfig (the root configs, the browser tests, eval scripts) get a default program.
        projectService: { allowDefaultProject: ["*.ts", "test-browser/*.ts", "scripts/*.ts"] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { "@typescript-eslint": tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // A promise nobody awaits loses its rejection (an unhandled error, a write that never lands)
      // and, in a Worker, may be cut off when the response ends: await it, return it, hand it to
      // waitUntil, or mark it `void` on purpose.
      "@typescript-eslint/no-floating-promises": "error",
      // A promise where a boolean or a void callback is expected is a forgotten `await`.
      "@typescript-eslint/no-misused-promises": "error",
    },
  },
  {
    // Implementations are chosen once, in `Deps` (src/deps.ts), at the app's edge. A module that
    // exports a binding or an object of functions others can reassign invites tests to swap it.
    files: ["src/**/*.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector: "ExportNamedDeclaration > VariableDeclaration[kind!='const']",
          message: "src/ exports no mutable binding: choose implementations in Deps (src/deps.ts).",
        },
        {
          selector:
            "ExportNamedDeclaration > VariableDeclaration > VariableDeclarator > ObjectExpression > Property:matches([method=true], [value.type='ArrowFunctionExpression'], [value.type='FunctionExpression'])",
          message:
            "src/ exports no object of swappable functions: choose implementations in Deps (src/deps.ts), or export the functions.",
        },
        {
          selector:
            "ExportNamedDeclaration > VariableDeclaration > VariableDeclarator > Identifier.id > TSTypeAnnotation > TSTypeLiteral :matches(TSFunctionType, TSMethodSignature)",
          message:
            "src/ exports no object of swappable functions: choose implementations in Deps (src/deps.ts), or export the functions.",
        },
      ],
    },
  },
];
