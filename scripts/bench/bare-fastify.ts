/**
 * Baselines for metadata reads, on the same Fastify 5 as Coffer.
 *
 * - `bare-fastify.cjs <port>`: a bare route (no logger, hooks, schemas or database) returning a
 *   constant JSON body the size and shape of a File: the baseline.
 * - `bare-fastify.cjs <port> <data-dir>`: the same route doing only the work any implementation
 *   must do per request: hash the Bearer key and find its tenant, read the file's row (SQLite,
 *   Coffer's database), and write an access log line (pino, to stdout, as Coffer does). A
 *   reference point that tells the cost of that work from the cost of Coffer's own code.
 */
import { createHash } from 'node:crypto'
import path from 'node:path'
import Database from 'better-sqlite3'
import Fastify from 'fastify'
import pino from 'pino'

const FILE = {
  id: '01932f8e-3b7a-7c41-9a52-6f0e1d2c3b4a',
  url: '/api/v1/files/01932f8e-3b7a-7c41-9a52-6f0e1d2c3b4a/download',
  originalName: 'file-12345.png',
  fileType: 'image/png',
  sizeBytes: 1345,
  context: 'invoices',
  tags: {},
  metadata: null,
  processingStatus: 'completed',
  workspaceId: null,
  createdAt: '2025-01-02T10:17:36.000Z',
}

const [port, dataDir] = process.argv.slice(2)
const app = Fastify()
app.get('/health', async () => ({ status: 'ok' }))

if (dataDir === undefined) {
  app.get('/api/v1/files/:fileId', async () => FILE)
} else {
  const db = new Database(path.join(dataDir, 'coffer.db'), { readonly: true })
  const tenantByKey = db.prepare<[Buffer], { id: string }>('SELECT id FROM tenants WHERE key_hash = ?')
  const fileById = db.prepare<[string, string], Record<string, unknown>>('SELECT * FROM files WHERE id = ? AND tenant_id = ? AND deleted_at IS NULL')
  const log = pino({ base: { service: 'bench' } })
  app.get<{ Params: { fileId: string } }>('/api/v1/files/:fileId', async (request, reply) => {
    const key = (request.headers.authorization ?? '').slice('Bearer '.length)
    const tenant = tenantByKey.get(createHash('sha256').update(key).digest())
    const row = tenant && fileById.get(request.params.fileId, tenant.id)
    reply.code(row ? 200 : 404)
    log.info({ reqId: request.id, method: request.method, url: request.url, statusCode: reply.statusCode, tenantId: tenant?.id }, 'request completed')
    return row
      ? { ...FILE, id: row.id, originalName: row.original_name, sizeBytes: row.size_bytes, tags: JSON.parse(row.tags as string) as Record<string, string> }
      : {}
  })
}

app.listen({ port: Number(port), host: '127.0.0.1' }).catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)))
