// Runs inside the sandbox under Node, as uid 65534, with no network. Started ahead of time by the
// warm pool, it blocks reading one job (JSON) until EOF, runs it once, and writes a status record to
// a separate channel (an inherited fd or a file), never in-band on stdout. rlimits are applied by the
// launcher (Node cannot lower its own).
//
// argv: --job (fd:N | file:PATH) --status (fd:N | file:PATH)
'use strict';
const fs = require('fs');
const Module = require('module');

function parseArgv(argv) {
  const options = {};
  for (let i = 0; i < argv.length; i += 2) options[argv[i].replace(/^--/, '')] = argv[i + 1];
  return options;
}

function readJob(spec) {
  const [kind, where] = [spec.slice(0, spec.indexOf(':')), spec.slice(spec.indexOf(':') + 1)];
  if (kind === 'fd') {
    const fd = Number(where);
    const chunks = [];
    const buffer = Buffer.alloc(1 << 16);
    for (;;) {
      let n;
      try {
        n = fs.readSync(fd, buffer, 0, buffer.length, null);
      } catch (err) {
        if (err.code === 'EAGAIN') continue;
        throw err;
      }
      if (n === 0) break;
      chunks.push(Buffer.from(buffer.subarray(0, n)));
    }
    if (fd !== 0) fs.closeSync(fd);  // stdin stays open at EOF: code that reads it gets nothing
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  }
  const job = JSON.parse(fs.readFileSync(where, 'utf8'));
  fs.unlinkSync(where);
  return job;
}

const DEFAULT_MAX_STATUS_BYTES = 16 << 20;
const STATUS_RESERVE_BYTES = 1024;  // as in python_runner.py

function tooLarge(size, limit) {
  return Buffer.from(JSON.stringify({ ok: false, error: {
    type: 'StatusTooLarge', size, limit,
    message: `main()'s return value makes a status record of ${size} bytes; the limit is ${limit}`,
  } }));
}

// Writes the one status record. A record over the limit (the host's MAX_STATUS_BYTES, and on a file
// channel also the job's file-size limit, which Node cannot exceed without dying of SIGXFSZ) is replaced
// by a small StatusTooLarge record, a record that cannot be written by a StatusWriteError one; either
// way the process then exits 1.
function statusWriter(spec) {
  const [kind, where] = [spec.slice(0, spec.indexOf(':')), spec.slice(spec.indexOf(':') + 1)];
  const isFile = kind !== 'fd';
  const fd = isFile ? fs.openSync(where, 'w', 0o600) : Number(where);
  if (isFile) {
    // Room taken now: a job that fills the directory's tmpfs must still get its record out, and the
    // stand-in records always fit here. The record overwrites it; a shorter one is truncated to size.
    try {
      fs.writeSync(fd, Buffer.alloc(STATUS_RESERVE_BYTES, 0x20));
    } catch (ignored) {
      // no room even now: the record is attempted anyway
    }
  } else {
    fs.writeSync(fd, 'READY\n');  // the pool's signal that this runtime is up and waiting
  }
  let written = false;
  let limit = DEFAULT_MAX_STATUS_BYTES;
  const writeRecord = (buffer) => {
    let offset = 0;
    while (offset < buffer.length) {
      offset += fs.writeSync(fd, buffer, offset, buffer.length - offset, isFile ? offset : null);
    }
    if (isFile) fs.ftruncateSync(fd, buffer.length);  // shrinking needs no room
  };
  const write = (record) => {
    if (written) return;
    written = true;
    let data = Buffer.from(JSON.stringify(record));
    if (data.length > limit) {
      data = tooLarge(data.length, limit);
      process.exitCode = 1;
    }
    try {
      writeRecord(data);
    } catch (err) {
      process.exitCode = 1;
      try {
        writeRecord(Buffer.from(JSON.stringify({ ok: false, error: {
          type: 'StatusWriteError', message: `could not write the status record: ${err.message}` } })));
      } catch (ignored) {
        // the job closed the channel itself; nothing to report
      }
    }
    try {
      fs.closeSync(fd);
    } catch (ignored) {
      // already closed by the job
    }
  };
  write.configure = (job) => {
    limit = Number(job.max_status_bytes) || DEFAULT_MAX_STATUS_BYTES;
    if (isFile) limit = Math.min(limit, Number(job.limits.file_size_bytes));
  };
  return write;
}

function errorRecord(err) {
  const type = err && err.constructor && err.constructor.name ? err.constructor.name : 'Error';
  const message = err && err.message !== undefined ? String(err.message) : String(err);
  return { ok: false, error: { type, message: message.slice(0, 2000) } };
}

function main() {
  // Blocking stdout/stderr: when the reader is slow (a container engine's exec stream), a non-blocking
  // pipe would make Node queue output in memory without bound instead of waiting.
  for (const stream of [process.stdout, process.stderr]) {
    if (stream._handle && typeof stream._handle.setBlocking === 'function') stream._handle.setBlocking(true);
  }
  const options = parseArgv(process.argv.slice(2));
  const writeStatus = statusWriter(options.status);
  const job = readJob(options.job);
  writeStatus.configure(job);
  fs.mkdirSync(job.output_dir || 'artifacts', { recursive: true });
  const mode = job.mode || 'auto';
  const filename = process.cwd() + '/main.js';
  const fail = (err) => {
    process.stderr.write((err && err.stack ? err.stack : String(err)) + '\n');
    writeStatus(errorRecord(err));
    process.exitCode = 1;
  };
  process.on('uncaughtException', (err) => { fail(err); process.exit(1); });
  process.on('unhandledRejection', (err) => { fail(err); process.exit(1); });
  process.on('exit', (code) => { if (code === 0) writeStatus({ ok: true }); });
  let exported;
  try {
    const mod = new Module(filename, null);
    mod.filename = filename;
    mod.paths = Module._nodeModulePaths(process.cwd());
    const tail = "\n;if (typeof main === 'function' && module.exports.main === undefined) module.exports.main = main;\n";
    mod._compile(job.code + tail, filename);
    exported = mod.exports;
  } catch (err) {
    fail(err);
    return;
  }
  const entry = exported && exported.main;
  if (mode === 'main' && typeof entry !== 'function') {
    fail(new ReferenceError('the code must define main(arguments) in MAIN_FUNCTION mode'));
    return;
  }
  if (mode === 'script' || typeof entry !== 'function') return;
  // A promise from main() that never settles leaves nothing to wait on: Node then simply exits with 0.
  // That is not a success (main() never returned); 'beforeExit' is not emitted for process.exit().
  let settled = false;
  process.on('beforeExit', () => {
    if (settled) return;
    settled = true;
    const err = new Error('main() returned a promise that never settled (nothing was left for it to wait on)');
    err.stack = `Error: ${err.message}`;  // the runner's frames mean nothing to the job's author
    fail(err);
  });
  Promise.resolve()
    .then(() => entry(job.arguments || {}))
    .then((value) => {
      settled = true;
      let text;
      try {
        text = JSON.stringify(value === undefined ? null : value);
      } catch (err) {
        text = JSON.stringify(String(value));
      }
      writeStatus({ ok: true, result: text === undefined ? 'null' : text });
    }, (err) => {
      settled = true;
      fail(err);
    });
}

main();
