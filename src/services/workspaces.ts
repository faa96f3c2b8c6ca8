import { AppError, notFound, validationError } from '../errors'
import type { DB } from '../db/database'
import { constraintViolated, engineOf, type Engine } from '../db/engine'
import type { Workspace, WorkspacesRepo } from '../db/repos/workspaces'
import type { AuthenticatedTenant } from '../db/repos/tenants'
import type { Clock } from '../lib/clock'
import type { FilesRepo } from '../db/repos/files'
import { isUuid, uuidv7 } from '../lib/ids'
import type { FileEvents } from '../webhooks/events'
import { parseWebhookUrl } from '../webhooks/url'
import { valueDeeperThan } from '../lib/json-depth'
import { MAX_METADATA_BYTES, MAX_METADATA_DEPTH } from '../contract/workspaces'

export interface CreateWorkspaceInput {
  name: string
  slug: string
  quotaBytes?: number | null
  metadata?: Record<string, unknown> | null
  webhookUrl?: string | null
}

export interface UpdateWorkspaceInput {
  name?: string
  slug?: string
  quotaBytes?: number | null
  metadata?: Record<string, unknown> | null
  webhookUrl?: string | null
}

function checkMetadata(metadata: Record<string, unknown> | null | undefined): void {
  // Depth first: serializing a deeply nested value would exhaust the stack.
  if (metadata && valueDeeperThan(metadata, MAX_METADATA_DEPTH)) throw validationError('/metadata', `must nest at most ${MAX_METADATA_DEPTH} levels`)
  if (metadata && Buffer.byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES) {
    throw validationError('/metadata', `must be at most ${MAX_METADATA_BYTES} bytes as JSON`)
  }
}

/** Workspaces partition a tenant's files, each with an optional quota of its own. */
export class WorkspacesService {
  private readonly engine: Engine

  constructor(
    db: DB | Engine,
    private readonly repo: WorkspacesRepo,
    private readonly files: FilesRepo,
    private readonly clock: Clock,
    private readonly events: FileEvents,
    private readonly webhookAllowPrivate: boolean,
    /** Object lock (#25): a workspace holding locked versions cannot be deleted. */
    private readonly objectLock?: { checkWorkspaceDeletable(workspaceId: string): void },
  ) {
    this.engine = engineOf(db)
  }

  /** The same rules as the handshake's webhookUrl (absolute http(s), SSRF literal checks). */
  private checkWebhookUrl(url: string | null | undefined): void {
    if (typeof url === 'string') parseWebhookUrl(url, this.webhookAllowPrivate)
  }

  /**
   * The workspace a request is scoped to, from a header (`X-Workspace-Id`) and an explicit input
   * field (`/workspaceId`): they must agree, and the workspace must be live in this tenant.
   */
  scope(tenantId: string, header: string | undefined, explicit: string | undefined): string | undefined {
    if (header !== undefined && explicit !== undefined && header.toLowerCase() !== explicit.toLowerCase()) {
      throw validationError('/workspaceId', 'differs from the X-Workspace-Id header')
    }
    const id = (explicit ?? header)?.toLowerCase()
    if (id === undefined) return undefined
    if (!this.repo.getLive(tenantId, id)) throw notFound.workspace()
    return id
  }

  list(tenant: AuthenticatedTenant): Workspace[] {
    return this.repo.list(tenant.id)
  }

  get(tenant: AuthenticatedTenant, id: string): Workspace {
    const w = isUuid(id) ? this.repo.getLive(tenant.id, id.toLowerCase()) : undefined
    if (!w) throw notFound.workspace()
    return w
  }

  create(tenant: AuthenticatedTenant, input: CreateWorkspaceInput): Workspace {
    checkMetadata(input.metadata)
    this.checkWebhookUrl(input.webhookUrl)
    const now = this.clock.now()
    const id = uuidv7(now)
    const taken = () => new AppError('CONFLICT', `A workspace with slug "${input.slug}" already exists`, { field: 'slug' })
    try {
      this.engine.transaction(() => {
        if (this.repo.getBySlug(tenant.id, input.slug)) throw taken()
        this.repo.insert({
          id,
          tenantId: tenant.id,
          name: input.name,
          slug: input.slug,
          quotaBytes: input.quotaBytes ?? null,
          metadata: input.metadata ?? null,
          webhookUrl: input.webhookUrl ?? null,
          now,
        })
      })
    } catch (err) {
      // Two nodes on one PostgreSQL database can both pass the check before either commits (#30):
      // the unique index (workspaces_slug) refuses the second, whose transaction is rolled back
      // whole. That is the check's CONFLICT when the slug is now taken (read after the rollback).
      if (constraintViolated(err) === 'unique' && this.repo.getBySlug(tenant.id, input.slug)) throw taken()
      throw err
    }
    return this.repo.getLive(tenant.id, id)!
  }

  /** `metadata` and `webhookUrl` replace; `quotaBytes: null` removes the limit; the slug never changes. */
  update(tenant: AuthenticatedTenant, id: string, input: UpdateWorkspaceInput): Workspace {
    checkMetadata(input.metadata)
    this.checkWebhookUrl(input.webhookUrl)
    return this.engine.transaction(() => {
      const w = this.get(tenant, id)
      if (input.slug !== undefined && input.slug !== w.slug) throw validationError('/slug', 'cannot be changed')
      this.repo.update({
        id: w.id,
        tenantId: tenant.id,
        name: input.name ?? w.name,
        quotaBytes: input.quotaBytes === undefined ? w.quotaBytes : input.quotaBytes,
        metadata: input.metadata === undefined ? w.metadata : input.metadata,
        webhookUrl: input.webhookUrl === undefined ? w.webhookUrl : input.webhookUrl,
        now: this.clock.now(),
      })
      return this.repo.getLive(tenant.id, w.id)!
    })
  }

  /**
   * One transaction: soft-deletes the workspace's files, fails its pending uploads, releases their
   * bytes at workspace and tenant level, and removes the workspace (its slug becomes reusable).
   */
  delete(tenant: AuthenticatedTenant, id: string): void {
    this.engine.transaction(() => {
      const w = this.get(tenant, id)
      this.objectLock?.checkWorkspaceDeletable(w.id)
      const now = this.clock.now()
      const pending = this.files.pendingInWorkspace(w.id)
      this.files.softDeleteInWorkspace(w.id, now)
      this.repo.softDelete(tenant.id, w.id, now)
      for (const fileId of pending) this.events.settled(fileId, { code: 'WORKSPACE_DELETED', message: 'The workspace was deleted before the upload completed' })
    })
  }
}
