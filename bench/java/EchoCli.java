// SPDX-License-Identifier: MIT
// bench/jvm_conns.sh's client: N echo connections to ADDR PORT from a pool of T threads, each a
// java.net.Socket that writes 1 to 20,000 bytes (by its number), half-closes, reads them back
// and then the end of the stream, and checks every byte. Prints "RESULT <ms> <cpu ms>" (the
// whole run's wall time and the process's CPU time), or exits 1 at the first difference.
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

public class EchoCli {
	public static void main(String[] a) throws Exception {
		String host = a[0];
		int port = Integer.parseInt(a[1]), total = Integer.parseInt(a[2]);
		int threads = Integer.parseInt(a[3]);
		AtomicInteger next = new AtomicInteger();
		ExecutorService ex = Executors.newFixedThreadPool(threads);
		Future<?>[] fs = new Future<?>[threads];
		long t0 = System.nanoTime();

		for (int t = 0; t < threads; t++)
			fs[t] = ex.submit(() -> {
				try {
					int i;

					while ((i = next.getAndIncrement()) < total)
						one(host, port, i);
				} catch (Exception e) {
					e.printStackTrace();
					System.exit(1);
				}
				return null;
			});
		for (Future<?> f : fs)
			f.get();
		ex.shutdown();
		long ms = (System.nanoTime() - t0) / 1000000;
		long cpu = ((com.sun.management.OperatingSystemMXBean)
			    ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime() / 1000000;
		System.out.println("RESULT " + ms + " " + cpu);
	}

	static void one(String host, int port, int i) throws Exception {
		int len = 1 + (i * 7919) % 20000;
		byte[] d = new byte[len], g = new byte[len];

		for (int j = 0; j < len; j++)
			d[j] = (byte)(i + j * 31);
		try (Socket s = new Socket(host, port)) {
			s.setTcpNoDelay(true);
			OutputStream o = s.getOutputStream();
			InputStream in = s.getInputStream();
			int got = 0, n;

			o.write(d);
			s.shutdownOutput();
			while (got < len && (n = in.read(g, got, len - got)) > 0)
				got += n;
			if (got != len || in.read() != -1)
				throw new RuntimeException("connection " + i + ": " + got + " of " + len +
							   " bytes, or no end");
			for (int j = 0; j < len; j++)
				if (g[j] != d[j])
					throw new RuntimeException("connection " + i + ": byte " + j + " differs");
		}
	}
}
