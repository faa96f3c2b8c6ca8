// @suites: sqlite
import t from 'tap'
import { isUuid, uuidv7 } from '../src/lib/ids'

t.test('uuidv7: version, variant, time prefix, and strictly increasing within a millisecond', async (t) => {
  const ms = Date.UTC(2026, 10, 23)
  const ids = Array.from({ length: 1000 }, () => uuidv7(ms))
  for (const id of ids.slice(0, 5)) {
    t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    t.equal(parseInt(id.replace(/-/g, '').slice(0, 12), 16), ms)
    t.ok(isUuid(id))
  }
  t.same([...ids].sort(), ids, 'sorted order is creation order')
  t.equal(new Set(ids).size, ids.length)
  const later = uuidv7(ms + 1)
  t.ok(later > ids.at(-1)!, 'a later millisecond sorts after')
  const earlier = uuidv7(ms - 5)
  t.ok(earlier > later, 'a clock that steps back never yields a smaller id')
  t.notOk(isUuid('not-a-uuid'))
  t.notOk(isUuid(42))
})
