// SPDX-License-Identifier: MIT
// test_pl_node's client (node ADDR PORT): 4 echo connections of 1 B to 5 MB, 20 rounds of 20 at
// once (each end() after its write: a half-close), then 400 HTTP POSTs over 8 keep-alive
// connections and 100 without keep-alive, then 20 connections to a server that writes 200,000
// bytes and destroys its socket (each must end in an end of file after every byte, within 10 s);
// every byte and length compared. Prints "ok N echo connections T ms".
const net = require('net'); const http = require('http'); const crypto = require('crypto');
const addr = process.argv[2], port = +process.argv[3];
let conns = 0;
async function echo(bytes) {
  return new Promise((res, rej) => {
    const data = crypto.randomBytes(bytes); const parts = [];
    const s = net.connect(port, addr, () => { conns++; s.end(data); });
    s.on('data', d => parts.push(d)); s.on('error', rej);
    s.on('end', () => { const got = Buffer.concat(parts); got.equals(data) ? res() : rej(new Error('echo differs ' + got.length + ' of ' + bytes)); });
  });
}
function get(agent, len, body) {
  return new Promise((res, rej) => {
    const req = http.request({ host: addr, port: port + 1, method: 'POST', agent, headers: { 'x-len': len } }, r => {
      let n = 0; r.on('data', d => n += d.length); r.on('end', () => (n === len && +r.headers['x-got'] === body.length) ? res() : rej(new Error('http ' + n + ' ' + r.headers['x-got'])));
    });
    req.on('error', rej); req.end(body);
  });
}
(async () => {
  const t0 = Date.now();
  await Promise.all([1, 1000, 100000, 5000000].map(echo));
  for (let i = 0; i < 20; i++) await Promise.all(Array.from({length: 20}, (_, k) => echo(1 + k * 997)));
  const ka = new http.Agent({ keepAlive: true, maxSockets: 8 });
  await Promise.all(Array.from({length: 400}, (_, k) => get(ka, 1 + (k * 131) % 70000, crypto.randomBytes((k * 17) % 5000))));
  await Promise.all(Array.from({length: 100}, (_, k) => get(undefined, 1000, Buffer.alloc(10))));
  ka.destroy();
  const big = Buffer.alloc(200000); for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 8)) & 255;
  for (let i = 0; i < 20; i++) await new Promise((res, rej) => {
    const parts = []; const s = net.connect(port + 2, addr);
    const t = setTimeout(() => rej(new Error('no end of file 10 s after ' + Buffer.concat(parts).length + ' bytes of a destroyed socket')), 10000);
    s.on('data', d => parts.push(d)); s.on('error', rej);
    s.on('end', () => { clearTimeout(t); const got = Buffer.concat(parts); got.equals(big) ? res() : rej(new Error('destroyed socket: ' + got.length + ' bytes differ')); });
  });
  console.log('ok', conns, 'echo connections', Date.now() - t0, 'ms');
})().catch(e => { console.error('FAIL', e); process.exit(1); });
