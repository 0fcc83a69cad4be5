import type { DurableObject } from "cloudflare:workers";

/**
 * An object's RPC surface exactly as its class declares it: every public method except the
 * runtime's own handlers (fetch, alarm, WebSocket events), which are not called over RPC.
 */
export type RpcSurface<T> = {
  [K in keyof T as K extends keyof DurableObject
    ? never
    : T[K] extends (...args: never[]) => Promise<unknown>
      ? K
      : never]: T[K];
};

/**
 * The one way Loom reaches a Durable Object: the namespace's stub, typed by the class itself.
 * Typed this way rather than as `DurableObjectStub<T>` because the stub's serialisable types turn
 * the `unknown` JSON values Loom's objects hand back (node outputs, chunk metadata) into `never`;
 * what crosses is plain JSON-shaped data, so the class's own signatures are what callers receive.
 */
export function rpcStub<T extends Rpc.DurableObjectBranded>(
  namespace: DurableObjectNamespace<T>,
  name: string,
): RpcSurface<T> {
  return namespace.get(namespace.idFromName(name)) as unknown as RpcSurface<T>;
}
