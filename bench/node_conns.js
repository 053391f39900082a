// SPDX-License-Identifier: MIT
// bench/node_conns.sh's client (node ADDR PORT N BYTES): N connections one after the other to an
// echo server, each writing BYTES and end() (a half-close), reading the echo to its end; every
// length compared. Prints "RESULT connect first total" in microseconds, the medians of the last
// nine tenths: from net.connect() to its callback, from there to the first data, and the whole.
const net = require('net');
const addr = process.argv[2], port = +process.argv[3], n = +process.argv[4], bytes = +process.argv[5];
const data = Buffer.alloc(bytes, 7);
function one() {
  return new Promise((res, rej) => {
    const t0 = process.hrtime.bigint(); let t1, t2; let got = 0;
    const s = net.connect(port, addr, () => { t1 = process.hrtime.bigint(); s.end(data); });
    s.on('data', d => { if (!t2) t2 = process.hrtime.bigint(); got += d.length; });
    s.on('error', rej);
    s.on('end', () => got === bytes ? res([t1 - t0, t2 - t1, process.hrtime.bigint() - t0])
                                   : rej(new Error('echo of ' + got + ' bytes, not ' + bytes)));
  });
}
(async () => {
  const r = [];
  for (let i = 0; i < n; i++) r.push(await one());
  const med = k => { const a = r.slice(Math.floor(n / 10)).map(x => Number(x[k]) / 1000).sort((x, y) => x - y);
                     return a[a.length >> 1].toFixed(0); };
  console.log('RESULT', med(0), med(1), med(2));
})().catch(e => { console.error('FAIL', e.message); process.exit(1); });
