// SPDX-License-Identifier: MIT
// test_pl_node's server (node ADDR PORT): a raw echo server on PORT (net, pipe), an HTTP server
// on PORT+1 answering each POST with X-Len bytes and the count of bytes it got (x-got), and on
// PORT+2 a server that writes 200,000 bytes and then destroys the socket (no end(): libuv closes
// it with syscall(SYS_close), a FIN after the data over TCP).
const net = require('net'); const http = require('http');
const addr = process.argv[2], port = +process.argv[3];
net.createServer(s => s.pipe(s)).listen(port, addr);
const big = Buffer.alloc(200000); for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 8)) & 255;
net.createServer(s => { s.on('error', () => {}); s.write(big, () => s.destroy()); }).listen(port + 2, addr);
http.createServer((req, res) => {
  let n = 0; req.on('data', d => n += d.length);
  req.on('end', () => { const body = Buffer.alloc(+(req.headers['x-len'] || 100), 'x'); res.setHeader('x-got', n); res.end(body); });
}).listen(port + 1, addr, () => console.log('listening'));
