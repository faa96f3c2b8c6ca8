// @suites: pg-all
import t from 'tap'
import { makeApp, createTenant } from './helper'

// The bucket configuration store every S3 configuration family keeps its document in (migration 15).
t.test('a bucket configuration is stored per bucket and family, replaced whole, and goes with its bucket', async (t) => {
  const { app, core } = await makeApp(t)
  const { apiKey } = await createTenant(app)
  const tenant = core.tenants.authenticate(apiKey)!
  const a = core.workspaces.create(tenant, { name: 'A', slug: 'a' })
  const b = core.workspaces.create(tenant, { name: 'B', slug: 'b' })
  const configs = core.bucketConfigs

  t.equal(configs.get(a.id, 'cors'), undefined, 'none until one is put')
  configs.put(a.id, 'cors', { rules: [{ origins: ['*'] }] })
  configs.put(a.id, 'tagging', { tags: { k: 'v' } })
  t.same(configs.get(a.id, 'cors'), { rules: [{ origins: ['*'] }] })
  t.equal(configs.get(b.id, 'cors'), undefined, "another bucket's family is its own")
  configs.put(a.id, 'cors', { rules: [] })
  t.same(configs.get(a.id, 'cors'), { rules: [] }, 'a put replaces the document whole')
  t.equal(configs.delete(a.id, 'cors'), true)
  t.equal(configs.delete(a.id, 'cors'), false, 'a second delete finds nothing')
  t.same(configs.get(a.id, 'tagging'), { tags: { k: 'v' } }, 'another family is untouched')

  core.workspaces.delete(tenant, a.id)
  t.equal(configs.get(a.id, 'tagging'), undefined, "a deleted bucket's configuration is gone")
  const again = core.workspaces.create(tenant, { name: 'A', slug: 'a' })
  t.equal(configs.get(again.id, 'tagging'), undefined, 'a new bucket of the same name starts bare')
})
