// The official E2B JS SDK against sandbox-mcp's embedded E2B-compatible
// sandbox: if these pass, e2b-local speaks the real protocol.
//
// Run by sdk_test.go, which starts the server and sets E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY. By hand:
//   sandbox-mcp e2b-local --listen 127.0.0.1:3000 --api-key e2b_fake &
//   E2B_API_URL=http://127.0.0.1:3000 E2B_SANDBOX_URL=http://127.0.0.1:3000 \
//   E2B_API_KEY=e2b_fake node --test runner/e2blocal/sdktest/
import { test, after, before } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { Sandbox, CommandExitError } from 'e2b'

for (const name of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[name]) {
    throw new Error(`${name} must be set (see the header of this file)`)
  }
}

const sandboxes = []
async function create(opts = {}) {
  const sbx = await Sandbox.create({
    timeoutMs: 120_000,
    allowInternetAccess: false,
    metadata: { suite: 'sdktest' },
    ...opts,
  })
  sandboxes.push(sbx)
  return sbx
}

async function eventually(what, fn, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await fn()) return
    if (Date.now() > deadline) assert.fail(`${what}: not true after ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 250))
  }
}

let sbx
before(async () => {
  sbx = await create()
})

after(async () => {
  for (const s of sandboxes) {
    try {
      await s.kill()
    } catch {
      // already gone
    }
  }
})

test('create-without-internet-gives-a-running-sandbox', async () => {
  assert.match(sbx.sandboxId, /^\S+$/)
  assert.equal(await sbx.isRunning(), true)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.metadata.suite, 'sdktest')
})

test('run-returns-stdout-stderr-and-exit-code', async () => {
  const res = await sbx.commands.run('echo out; echo err >&2; exit 0')
  assert.equal(res.exitCode, 0)
  assert.equal(res.stdout, 'out\n')
  assert.equal(res.stderr, 'err\n')
})

test('run-passes-env-and-cwd', async () => {
  const res = await sbx.commands.run('echo "$GREETING"; pwd', {
    envs: { GREETING: 'hello' },
    cwd: '/tmp',
  })
  assert.equal(res.stdout, 'hello\n/tmp\n')
})

test('non-zero-exit-raises-command-exit-error', async () => {
  await assert.rejects(
    sbx.commands.run('echo bad >&2; exit 3'),
    (err) => {
      assert.ok(err instanceof CommandExitError, `got ${err?.constructor?.name}: ${err}`)
      assert.equal(err.exitCode, 3)
      assert.equal(err.stderr, 'bad\n')
      return true
    },
  )
})

test('stdout-callbacks-arrive-before-the-command-ends', async () => {
  // The command prints "a", then waits for a file that only this callback
  // creates once it has seen "a": it can finish only if output streams.
  const gate = `/home/user/.gate-${Date.now()}`
  let opened
  const chunks = []
  const res = await sbx.commands.run(
    `echo a; for i in $(seq 200); do [ -e ${gate} ] && break; sleep 0.1; done; [ -e ${gate} ] || exit 7; echo b`,
    {
      timeoutMs: 60_000,
      onStdout: (data) => {
        chunks.push(data)
        if (!opened && data.includes('a')) opened = sbx.files.write(gate, 'go')
      },
    },
  )
  await opened
  assert.equal(res.exitCode, 0)
  assert.equal(res.stdout, 'a\nb\n')
  assert.ok(chunks.join('').startsWith('a\n'))
})

test('background-command-is-killed-by-its-handle', async () => {
  const handle = await sbx.commands.run('sleep 600', { background: true })
  assert.ok(handle.pid > 0)
  const listed = await sbx.commands.list()
  assert.ok(listed.some((p) => p.pid === handle.pid), 'background command is not listed')
  assert.equal(await handle.kill(), true)
  await assert.rejects(handle.wait(), CommandExitError)
  await eventually('killed command leaves the process list', async () => {
    const procs = await sbx.commands.list()
    return !procs.some((p) => p.pid === handle.pid)
  })
})

test('text-file-round-trips', async () => {
  const path = '/home/user/sdk/hello.txt'
  const info = await sbx.files.write(path, 'hello, sandbox\n')
  assert.equal(info.path, path)
  assert.equal(await sbx.files.read(path), 'hello, sandbox\n')
  const res = await sbx.commands.run(`cat ${path}`)
  assert.equal(res.stdout, 'hello, sandbox\n')
})

test('binary-file-of-10-mib-round-trips-byte-for-byte', async () => {
  const data = randomBytes(10 << 20)
  const path = '/home/user/sdk/random.bin'
  await sbx.files.write(path, new Uint8Array(data).buffer)
  const back = await sbx.files.read(path, { format: 'bytes' })
  assert.equal(back.length, data.length)
  assert.ok(Buffer.from(back).equals(data), 'downloaded bytes differ from uploaded bytes')
  const sum = await sbx.commands.run(`sha256sum ${path} | cut -d' ' -f1`)
  const { createHash } = await import('node:crypto')
  assert.equal(sum.stdout.trim(), createHash('sha256').update(data).digest('hex'))
})

test('list-and-remove-files', async () => {
  await sbx.files.write('/home/user/listing/a.txt', 'a')
  await sbx.files.write('/home/user/listing/b.txt', 'b')
  const names = (await sbx.files.list('/home/user/listing')).map((e) => e.name).sort()
  assert.deepEqual(names, ['a.txt', 'b.txt'])
  await sbx.files.remove('/home/user/listing/a.txt')
  assert.equal(await sbx.files.exists('/home/user/listing/a.txt'), false)
  assert.equal(await sbx.files.exists('/home/user/listing/b.txt'), true)
  const after = (await sbx.files.list('/home/user/listing')).map((e) => e.name)
  assert.deepEqual(after, ['b.txt'])
})

test('killed-sandbox-is-not-running', async () => {
  const doomed = await create()
  assert.equal(await doomed.isRunning(), true)
  await doomed.kill()
  assert.equal(await doomed.isRunning(), false)
})

test('sandbox-with-short-timeout-expires', async () => {
  const brief = await create({ timeoutMs: 2_000 })
  assert.equal(await brief.isRunning(), true)
  await eventually('sandbox stops after its timeout', async () => !(await brief.isRunning()))
})
