// @suites: sqlite
import t from 'tap'
import { formatBytes, parseSize, percent } from '../src/console/format'

// The console's size fields take what people write; what they read back must round-trip.
t.test('sizes typed into the console', async (t) => {
  t.equal(parseSize('10 GiB'), 10 * 2 ** 30)
  t.equal(parseSize('500MiB'), 500 * 2 ** 20)
  t.equal(parseSize('1.5 kib'), 1536)
  t.equal(parseSize('2 GB'), 2e9)
  t.equal(parseSize('1048576'), 1048576)
  t.equal(parseSize(' 7 b '), 7)
  for (const bad of ['', 'ten', '-1 GiB', '1 PB', '1e3', '2 GiB 3']) t.equal(parseSize(bad), null, JSON.stringify(bad))
  t.equal(parseSize('99999999 TiB'), null, 'beyond a safe integer')
})

t.test('sizes shown by the console', async (t) => {
  t.equal(formatBytes(0), '0 B')
  t.equal(formatBytes(1023), '1023 B')
  t.equal(formatBytes(1536), '1.5 KiB')
  t.equal(formatBytes(2 ** 30), '1 GiB')
  t.equal(formatBytes(524_288_000), '500 MiB')
  for (const n of [2 ** 30, 500 * 2 ** 20, 2 ** 20 * 3]) t.equal(parseSize(formatBytes(n)), n, `${formatBytes(n)} reads back`)
  t.equal(percent(50, 200), '25%')
  t.equal(percent(0, 0), '–', 'no quota, no percentage')
})
