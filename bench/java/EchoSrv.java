// SPDX-License-Identifier: MIT
// bench/jvm_conns.sh's server: a java.nio selector echo server on ADDR PORT, one thread. Every
// connection's bytes go back as they come; its end (the client's half-close) closes it once
// everything was written back.
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Iterator;

public class EchoSrv {
	public static void main(String[] a) throws Exception {
		Selector sel = Selector.open();
		ServerSocketChannel ss = ServerSocketChannel.open();

		ss.bind(new InetSocketAddress(a[0], Integer.parseInt(a[1])), 512);
		ss.configureBlocking(false);
		ss.register(sel, SelectionKey.OP_ACCEPT);
		System.out.println("listening");
		System.out.flush();
		for (;;) {
			sel.select();
			Iterator<SelectionKey> it = sel.selectedKeys().iterator();

			while (it.hasNext()) {
				SelectionKey k = it.next();

				it.remove();
				if (!k.isValid())
					continue;
				if (k.isAcceptable()) {
					SocketChannel c;

					while ((c = ss.accept()) != null) {
						c.configureBlocking(false);
						c.register(sel, SelectionKey.OP_READ,
							   ByteBuffer.allocateDirect(65536));
					}
					continue;
				}
				SocketChannel c = (SocketChannel) k.channel();
				ByteBuffer b = (ByteBuffer) k.attachment();

				if (k.isWritable()) {
					b.flip();
					c.write(b);
					b.compact();
					if (b.position() == 0)
						k.interestOps(SelectionKey.OP_READ);
					continue;
				}
				int n;

				try {
					n = c.read(b);
				} catch (Exception e) {
					n = -1;
				}
				if (n < 0) {
					c.close();
					continue;
				}
				b.flip();
				c.write(b);
				b.compact();
				if (b.position() > 0)
					k.interestOps(SelectionKey.OP_WRITE); /* (no read until written) */
			}
		}
	}
}
