import { badRequest } from "../../lib/errors";
import type { SandboxLanguage } from "../../sandbox/sandbox.types";

/**
 * Top-level function definitions, found without running the source: a definition at the start
 * of a line (nested ones are indented). The sandbox's check confirms the pick afterwards.
 */
const TOP_LEVEL_FUNCTIONS: Record<SandboxLanguage, RegExp[]> = {
  python: [/^(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)[ \t]*\(/gm, /^([A-Za-z_]\w*)[ \t]*=[ \t]*lambda\b/gm],
  javascript: [
    /^(?:async[ \t]+)?function[ \t]*\*?[ \t]*([A-Za-z_]\w*)[ \t]*\(/gm,
    /^(?:const|let|var)[ \t]+([A-Za-z_]\w*)[ \t]*=[ \t]*(?:async[ \t]+)?(?:function\b|\([^)\n]*\)[ \t]*=>|[A-Za-z_]\w*[ \t]*=>)/gm,
  ],
};

export function topLevelFunctions(language: SandboxLanguage, source: string): string[] {
  const names = new Set<string>();
  for (const pattern of TOP_LEVEL_FUNCTIONS[language])
    for (const match of source.matchAll(pattern)) names.add(match[1]);
  return [...names];
}

/**
 * The function a transformation runs. An empty `function_name` (the hosted SDK's default) means
 * the only function the source defines; with none or several, the caller must name one.
 */
export function resolveFunctionName(language: SandboxLanguage, source: string, given: string): string {
  if (given !== "") return given;
  const found = topLevelFunctions(language, source);
  if (found.length === 1) return found[0];
  if (found.length === 0)
    throw badRequest("function_name: the source defines no top-level function; define one or name it");
  const listed = found.slice(0, 10).join(", ");
  throw badRequest(`function_name: the source defines several functions (${listed}); name the one to run`);
}
