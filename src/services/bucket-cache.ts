import type { BucketChanges } from '../db/bucket-changes'
import type { BucketConfigsRepo } from '../db/repos/bucket-configs'
import type { VersioningStatus, VersionsRepo } from '../db/repos/versions'
import type { Workspace, WorkspacesRepo } from '../db/repos/workspaces'

/**
 * A bucket's workspace as the cache holds it: without its usage, which every write changes (the
 * quotas read it fresh, in the transaction that charges it).
 */
export type BucketWorkspace = Omit<Workspace, 'usedBytes'>

/** What the cache holds of one workspace; each part is read on first need. */
interface Entry {
  versioning?: VersioningStatus
  /** Configuration documents (JSON text) by family: all of the bucket's, read in one statement. */
  configs?: ReadonlyMap<string, string>
}

/** Beyond this many buckets the cache starts again (a bound, not an eviction policy: hits come from few hot buckets). */
const MAX_ENTRIES = 10_000

/**
 * A bucket's state as every request reads it — its workspace by name, its versioning, its
 * configuration documents (ACL, policy, public access block, default encryption, lifecycle, object
 * lock, CORS, tags) — read once and kept across requests (#29): a 4 KiB PutObject read the
 * workspace three times, its versioning up to three times and four documents one statement each,
 * about a third of its statements.
 *
 * Valid while nothing changed it: another connection's commit (another worker of `--workers N`,
 * the CLI: `PRAGMA data_version`) or this connection's write of a workspace, its versioning or a
 * document (db/bucket-changes.ts), each seen by the next request. Only committed state is kept:
 * nothing read inside a transaction is stored, as that transaction might still write and roll
 * back. Inside a write transaction a hit is one read of the data version (once per group-commit
 * batch), and what the transaction decides by (the bucket is live, its versioning, its lock
 * configuration) is as fresh as a read of the rows. The usage is never cached.
 *
 * On PostgreSQL (#30) nothing is kept: `changes` is undefined and every call reads the rows.
 */
export class BucketCache {
  private readonly bySlug = new Map<string, BucketWorkspace>()
  private readonly byId = new Map<string, BucketWorkspace>()
  private readonly entries = new Map<string, Entry>()
  private atVersion = -1
  private atLocal = -1

  constructor(
    private readonly repos: { workspaces: WorkspacesRepo; versions: VersionsRepo; configs: BucketConfigsRepo },
    private readonly changes: BucketChanges | undefined,
  ) {}

  /** The tenant's live workspace with that slug. */
  workspace(tenantId: string, slug: string): BucketWorkspace | undefined {
    const state = this.state()
    const k = `${tenantId}\0${slug}`
    const known = state === 'none' ? undefined : this.bySlug.get(k)
    if (known) return known
    const w = this.repos.workspaces.getBySlug(tenantId, slug)
    if (!w) return undefined
    const { usedBytes: _usage, ...bucket } = w
    if (state === 'keep') {
      this.bound()
      this.bySlug.set(k, bucket)
      this.byId.set(bucket.id, bucket)
    }
    return bucket
  }

  /** The tenant's live workspace with that id. */
  live(tenantId: string, workspaceId: string): BucketWorkspace | undefined {
    const known = this.state() === 'none' ? undefined : this.byId.get(workspaceId)
    if (known) return known.tenantId === tenantId ? known : undefined
    const w = this.repos.workspaces.getLive(tenantId, workspaceId)
    if (!w) return undefined
    const { usedBytes: _usage, ...bucket } = w
    return bucket
  }

  versioning(workspaceId: string): VersioningStatus {
    const { entry, keep } = this.entry(workspaceId)
    if (entry?.versioning !== undefined) return entry.versioning
    const status = this.repos.versions.versioning(workspaceId)
    if (keep) this.fill(workspaceId).versioning = status
    return status
  }

  /** The JSON text of the bucket's document of that family, or undefined. */
  config(workspaceId: string, family: string): string | undefined {
    const { entry, keep } = this.entry(workspaceId)
    if (entry?.configs) return entry.configs.get(family)
    if (!keep) return this.repos.configs.get(workspaceId, family)
    const configs = this.repos.configs.allOf(workspaceId)
    this.fill(workspaceId).configs = configs
    return configs.get(family)
  }

  private entry(workspaceId: string): { entry: Entry | undefined; keep: boolean } {
    const state = this.state()
    return { entry: state === 'none' ? undefined : this.entries.get(workspaceId), keep: state === 'keep' }
  }

  private fill(workspaceId: string): Entry {
    let entry = this.entries.get(workspaceId)
    if (!entry) {
      this.bound()
      this.entries.set(workspaceId, (entry = {}))
    }
    return entry
  }

  /**
   * Empties what may be stale, then says what may be done: `keep` (use what is held, keep what is
   * read), `use` (inside a transaction: use what is held, keep nothing new), `none` (PostgreSQL).
   */
  private state(): 'keep' | 'use' | 'none' {
    const { changes } = this
    if (!changes) return 'none'
    const version = changes.version()
    const local = changes.local()
    if (version !== this.atVersion || local !== this.atLocal) {
      this.bySlug.clear()
      this.byId.clear()
      this.entries.clear()
      this.atVersion = version
      this.atLocal = local
    }
    return changes.inTransaction() ? 'use' : 'keep'
  }

  private bound(): void {
    if (this.entries.size + this.bySlug.size >= MAX_ENTRIES) {
      this.bySlug.clear()
      this.byId.clear()
      this.entries.clear()
    }
  }
}
