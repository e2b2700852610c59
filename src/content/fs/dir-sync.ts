/**
 * Directory fsyncs shared by concurrent publishes. Every creation fsyncs the directories whose entries
 * it changed, and concurrent creations share parents (`artifacts/`, a run's directory): a request
 * joins a fsync of the same directory that has not been issued yet, and one that arrives while a
 * fsync of it runs waits for the next one — issued after the request, so it covers the entries the
 * requester made before asking. Fewer fsyncs hold fewer threads of the I/O pool, which the file fsyncs
 * of other publishes need at the same time.
 */
export class DirSyncer {
  private readonly running = new Map<string, Promise<void>>();
  private readonly queued = new Map<string, Promise<void>>();

  constructor(private readonly fsync: (dir: string) => Promise<void>) {}

  /** Resolves once a fsync of `dir` issued after this call has succeeded; rejects with its error. */
  sync(dir: string): Promise<void> {
    const queued = this.queued.get(dir);
    if (queued) return queued;
    const running = this.running.get(dir);
    if (!running) return this.issue(dir);
    const next = running
      .catch(() => {})
      .then(() => {
        this.queued.delete(dir);
        return this.issue(dir);
      });
    this.queued.set(dir, next);
    return next;
  }

  private issue(dir: string): Promise<void> {
    const p = this.fsync(dir).finally(() => {
      if (this.running.get(dir) === p) this.running.delete(dir);
    });
    this.running.set(dir, p);
    return p;
  }
}
