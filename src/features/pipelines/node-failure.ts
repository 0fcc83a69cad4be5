/**
 * A node failed for a reason its run reports as is (the message is shown to the user). Its own
 * module, importing nothing, so the run service and the node services can both throw it without
 * importing each other.
 */
export class NodeFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NodeFailure";
  }
}
