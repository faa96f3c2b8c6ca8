// @suites: sqlite
import t from 'tap'
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { buildBundle, startCoffer } from './process-helper'
import { tempDir } from './helper'
import { inWalMode, openDatabase, type DB } from '../src/db/database'
import { MIGRATIONS } from '../src/db/migrations'
import { buildSchemaImage, packImage, unpackImage } from '../src/db/schema-image'

// A new data dir starts from the schema image the build made, not by running every migration (#28).

buildBundle()

/** Everything that makes the schema: each object's type, name, table and SQL, in name order. */
const schema = (db: DB) => db.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name").all()
/** Where each object lives: the image's layout, which the migrations' table rebuilds do not give. */
const rootpages = (db: DB) => db.prepare('SELECT name, rootpage FROM sqlite_master ORDER BY name').all()
const recorded = (db: DB) => db.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all()

t.test('the image has the schema the migrations make: sqlite_master, user_version, schema_migrations, pragmas', async (t) => {
  const dir = tempDir(t)
  const migrated = openDatabase(path.join(dir, 'migrated.db'), dir)
  t.teardown(() => migrated.close())
  const before = Date.now()
  const imaged = openDatabase(path.join(dir, 'imaged.db'), dir, MIGRATIONS, { image: buildSchemaImage() })
  t.teardown(() => imaged.close())
  t.same(schema(imaged), schema(migrated), 'the same tables, indexes, triggers and views, with the same SQL')
  t.ok(schema(imaged).length > 40)
  t.equal(imaged.pragma('user_version', { simple: true }), migrated.pragma('user_version', { simple: true }), 'user_version')
  t.same(recorded(imaged), recorded(migrated), 'every migration recorded as applied')
  t.equal(recorded(imaged).length, MIGRATIONS.length)
  const times = imaged.prepare('SELECT DISTINCT applied_at FROM schema_migrations').pluck().all() as number[]
  t.ok(times.length === 1 && times[0]! >= before && times[0]! <= Date.now(), 'applied_at is when the database was made, not the build')
  for (const p of ['journal_mode', 'page_size', 'encoding', 'auto_vacuum', 'foreign_keys', 'application_id'])
    t.equal(imaged.pragma(p, { simple: true }), migrated.pragma(p, { simple: true }), p)
  t.same(imaged.pragma('integrity_check'), [{ integrity_check: 'ok' }])
  // The image's layout (rootpages) is not what the migrations give: it was the image that was opened.
  t.same(rootpages(imaged), rootpages(new Database(buildSchemaImage())), 'the database is the image')
  t.notSame(rootpages(imaged), rootpages(migrated))
})

t.test('an image is never written over a database, nor beside a WAL an earlier run left', async (t) => {
  const dir = tempDir(t)
  const file = path.join(dir, 'coffer.db')
  const first = openDatabase(file, dir)
  first.exec('CREATE TABLE marker (n INTEGER); INSERT INTO marker VALUES (7)')
  first.close()
  const again = openDatabase(file, dir, MIGRATIONS, { image: buildSchemaImage(), throwaway: true })
  t.teardown(() => again.close())
  t.equal(again.prepare('SELECT n FROM marker').pluck().get(), 7, 'the existing database is kept')
  again.exec('DROP TABLE marker')

  const lone = path.join(dir, 'lone.db')
  fs.writeFileSync(`${lone}-wal`, '')
  const beside = openDatabase(lone, dir, MIGRATIONS, { image: buildSchemaImage(), throwaway: true })
  t.teardown(() => beside.close())
  t.notSame(rootpages(beside), rootpages(new Database(buildSchemaImage())), 'migrated, not started from the image')
  t.same(schema(beside), schema(again))
})

t.test('an image behind the migrations is brought up to date by them', async (t) => {
  const dir = tempDir(t)
  const older = buildSchemaImage(MIGRATIONS.slice(0, 10))
  const db = openDatabase(path.join(dir, 'coffer.db'), dir, MIGRATIONS, { image: older, throwaway: true })
  t.teardown(() => db.close())
  const migrated = openDatabase(path.join(dir, 'migrated.db'), dir)
  t.teardown(() => migrated.close())
  t.same(schema(db), schema(migrated))
  t.same(recorded(db), recorded(migrated))
})

t.test('packing: the image round-trips, is deterministic, and a truncated one is refused', async (t) => {
  const image = buildSchemaImage()
  const packed = packImage(image)
  t.ok(unpackImage(packed).equals(image))
  t.ok(packed.length < image.length / 5, `${packed.length} bytes packed of ${image.length}`)
  t.ok(buildSchemaImage().equals(image), 'the same bytes on every build')
  for (const bytes of [Buffer.from([0, 5, 1, 2]), Buffer.from([0x80])]) t.throws(() => unpackImage(bytes), /truncated/)
  const odd = Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0])
  t.ok(unpackImage(packImage(odd)).equals(odd))
  t.ok(unpackImage(packImage(Buffer.alloc(0))).equals(Buffer.alloc(0)))
})

t.test('the bundle: a new data dir is the build-time image, with the migrated schema', async (t) => {
  const dir = tempDir(t)
  const dataDir = path.join(dir, 'data')
  const server = await startCoffer(['serve', '--data-dir', dataDir, '--port', '0', '--s3-port', 'off'], { cwd: dir })
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  const db = new Database(path.join(dataDir, 'coffer.db'), { readonly: true })
  t.teardown(() => db.close())
  const migrated = openDatabase(path.join(dir, 'migrated.db'), dir)
  t.teardown(() => migrated.close())
  t.same(schema(db), schema(migrated))
  t.same(recorded(db), recorded(migrated))
  t.same(rootpages(db), rootpages(new Database(buildSchemaImage())), 'the layout of the image, not of the migrations')
  t.equal((fs.statSync(path.join(dataDir, 'coffer.db')).mode & 0o777).toString(8), '600')
})

t.test('a new data dir starts in WAL mode from its first byte: no process starting on it switches the journal', async (t) => {
  // Two processes switching a rollback-journal database to WAL at once both hold the shared lock
  // and want the exclusive one: SQLite refuses one at once, whatever its busy timeout, to avoid a
  // deadlock. A file already in WAL mode needs no switch.
  const dir = tempDir(t)
  const file = path.join(dir, 'image.db')
  fs.writeFileSync(file, inWalMode(buildSchemaImage()))
  const raw = new Database(file, { readonly: true })
  t.equal(raw.pragma('journal_mode', { simple: true }), 'wal', 'the file is a WAL database before anyone opens it to write')
  t.equal(raw.prepare('SELECT count(*) FROM schema_migrations').pluck().get(), MIGRATIONS.length, 'and the image')
  raw.close()
  const made = path.join(dir, 'made.db')
  const db = openDatabase(made, dir, MIGRATIONS, { image: buildSchemaImage() })
  db.close()
  t.same([...fs.readFileSync(made).subarray(18, 20)], [2, 2], 'a data dir made from it is in WAL mode')
  t.same([...buildSchemaImage().subarray(18, 20)], [1, 1], 'which the image itself is not (serialized from :memory:)')
})
