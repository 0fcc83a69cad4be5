import type { AuthContext } from "../../env";
import { forbidden } from "../../lib/errors";
import { hasRole } from "../../middleware/auth";
import type { PipelineGraph } from "./pipeline-graph";

/**
 * Who may act on pipeline runs; every run route and service asks here, so the rules live in one
 * place:
 * - starting a run: anyone in the organization but viewers (who only read);
 * - pausing, resuming and terminating a run: the run's starter, the pipeline's owner, or an admin
 *   or owner of the organization;
 * - approving (resuming a run stopped at `approval` nodes): the pipeline's owner, an admin or
 *   owner of the organization, or a user named in each waiting node's `approvers`. The run's
 *   starter is not an approver by right, or an approval gate would stop no one.
 */
export interface RunOwners {
  /** The pipeline's owner. */
  ownerId: string;
}

export interface RunStarter {
  id: string;
  startedBy: string;
}

export function assertCanRun(auth: AuthContext): void {
  if (auth.role === "viewer") throw forbidden("viewers cannot run or control pipeline runs");
}

export function assertCanControlRun(
  auth: AuthContext,
  pipeline: RunOwners,
  run: RunStarter,
  action: "pause" | "resume" | "terminate",
): void {
  assertCanRun(auth);
  if (auth.userId === run.startedBy || auth.userId === pipeline.ownerId || hasRole(auth, "admin")) return;
  throw forbidden(`only the user who started run ${run.id}, the pipeline's owner or an admin can ${action} it`);
}

/** `waiting`: the approval nodes the run is stopped at; the caller must be allowed to approve every one. */
export function assertCanApprove(
  auth: AuthContext,
  pipeline: RunOwners & { graph: PipelineGraph },
  runId: string,
  waiting: string[],
): void {
  assertCanRun(auth);
  if (auth.userId === pipeline.ownerId || hasRole(auth, "admin")) return;
  for (const nodeId of waiting) {
    const node = pipeline.graph.nodes.find((n) => n.id === nodeId);
    const approvers = node?.type === "approval" ? (node.config.approvers ?? []) : [];
    if (!approvers.includes(auth.userId))
      throw forbidden(
        `run ${runId} is waiting for approval at node ${nodeId}; only the pipeline's owner, an admin or the node's approvers can approve it`,
      );
  }
}
