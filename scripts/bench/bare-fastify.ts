/**
 * The baseline for metadata reads: a bare Fastify 5 route (no logger, hooks, schemas or database)
 * returning a constant JSON body the size and shape of a File. Same Fastify version as Coffer.
 * Usage: bare-fastify.cjs <port>
 */
import Fastify from 'fastify'

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

const app = Fastify()
app.get('/health', async () => ({ status: 'ok' }))
app.get('/api/v1/files/:fileId', async () => FILE)
app.listen({ port: Number(process.argv[2]), host: '127.0.0.1' }).catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)))
