// @suites: pg-all
import t from 'tap'
import { makeApp } from './helper'
import { version } from '../package.json'

type Doc = {
  openapi: string
  info: { version: string }
  paths: Record<string, Record<string, { security?: Record<string, string[]>[]; requestBody?: unknown; responses: Record<string, unknown> }>>
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> }
}

/** Every documented operation: what the API reference (src/docs/api.md) lists, nothing more, nothing less. */
const OPERATIONS: Record<string, string[]> = {
  '/health': ['get'],
  '/ready': ['get'],
  '/api/v1/admin/tenants': ['get', 'post'],
  '/api/v1/admin/tenants/{tenantId}': ['delete', 'get', 'patch'],
  '/api/v1/admin/tenants/{tenantId}/regenerate-key': ['post'],
  '/api/v1/admin/tenants/{tenantId}/s3-credentials': ['post', 'get'],
  '/api/v1/admin/tenants/{tenantId}/s3-credentials/{accessKeyId}': ['delete'],
  '/api/v1/admin/overview': ['get'],
  '/api/v1/tenant/s3-credentials': ['get', 'post'],
  '/api/v1/tenant/s3-credentials/{accessKeyId}': ['delete'],
  '/api/v1/tenant/info': ['get'],
  '/api/v1/tenant/quota': ['get'],
  '/api/v1/upload/request': ['post'],
  '/api/v1/upload/{fileId}': ['put'],
  '/api/v1/files': ['get'],
  '/api/v1/files/{fileId}': ['get', 'delete'],
  '/api/v1/files/{fileId}/download': ['get', 'head'],
  '/api/v1/files/{fileId}/signed-url': ['get'],
  '/api/v1/files/{fileId}/versions': ['get'],
  '/api/v1/files/{fileId}/versions/{versionId}/restore': ['post'],
  '/api/v1/files/deleted': ['get'],
  '/api/v1/workspaces': ['get', 'post'],
  '/api/v1/workspaces/{workspaceId}': ['get', 'patch', 'delete'],
  '/api/v1/workspaces/{workspaceId}/objects': ['get', 'put'],
  '/api/v1/workspaces/{workspaceId}/objects/details': ['get'],
  '/api/v1/webhooks/deliveries': ['get'],
  '/api/v1/webhooks/deliveries/{deliveryId}/retry': ['post'],
}

/** Every `$ref` anywhere in `node`. */
function refs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => refs(n, out))
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v)
      else refs(v, out)
    }
  }
  return out
}

t.test('GET /openapi.json: an OpenAPI 3.1 document generated from the route schemas', async (t) => {
  const { app } = await makeApp(t)
  const res = await app.inject({ method: 'GET', url: '/openapi.json' })
  t.equal(res.statusCode, 200, 'no authentication needed')
  t.match(res.headers['content-type'], /^application\/json/)
  const doc = res.json() as Doc
  t.equal(doc.openapi, '3.1.0')
  t.equal(doc.info.version, version)
  t.same(
    Object.fromEntries(Object.entries(doc.paths).map(([p, ops]) => [p, Object.keys(ops).sort()])),
    Object.fromEntries(Object.entries(OPERATIONS).map(([p, ops]) => [p, [...ops].sort()])),
    'exactly the API: /metrics and /openapi.json are operational, not part of it',
  )

  for (const ref of refs(doc)) {
    const m = /^#\/components\/schemas\/(.+)$/.exec(ref)
    t.ok(m && doc.components.schemas[m[1]!] !== undefined, `${ref} resolves inside the document`)
  }

  const security = (p: string, op: string) => doc.paths[p]![op]!.security
  t.same(security('/api/v1/admin/tenants', 'post'), [{ adminKey: [] }])
  t.same(security('/api/v1/files', 'get'), [{ tenantKey: [] }])
  t.same(security('/api/v1/webhooks/deliveries', 'get'), [{ tenantKey: [] }])
  t.same(security('/api/v1/upload/{fileId}', 'put'), [{ signedToken: [] }])
  t.same(security('/api/v1/workspaces/{workspaceId}/objects', 'put'), [{ tenantKey: [] }])
  t.same(security('/api/v1/files/{fileId}/download', 'get'), [{ tenantKey: [] }, { signedToken: [] }])
  t.equal(security('/health', 'get'), undefined)
  t.same(Object.keys(doc.components.securitySchemes).sort(), ['adminKey', 'signedToken', 'tenantKey'])

  const body = JSON.stringify(doc.paths['/api/v1/upload/request']!.post!.requestBody)
  t.match(body, /"required":\["fileType","fileName"\]/, 'the handshake body schema, as validated')
  t.match(body, /"additionalProperties":false/)
  t.match(JSON.stringify(doc.paths['/api/v1/files/{fileId}']!.get!.responses['404']), /#\/components\/schemas\/ErrorResponse/)
})
