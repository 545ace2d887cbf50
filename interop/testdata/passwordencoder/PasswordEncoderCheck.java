// Checks package secret against Kafka's own EncryptingPasswordEncoder, which
// Kafka 4 removed together with ZooKeeper mode: it needs Kafka 3.x's
// kafka-server-common jar (3.9.1 was used) and kafka-clients, e.g.
//   mvn dependency:get -Dartifact=org.apache.kafka:kafka-server-common:3.9.1 -Dtransitive=false
//   java -cp "$M2/kafka-server-common-3.9.1.jar:.peers/kafka/lib/kafka-clients-4.4.0.jar" PasswordEncoderCheck.java
// It is not part of make test (the harness installs Kafka 4.4 only); the
// values it encoded are secret/vectors_test.go's, and it decoded values
// package secret encoded (CBC and GCM) to their clear text.
//
// Reads lines from stdin and answers one line each:
//   ENCODE <secret> <cipher> <keyFactory|-> <keyLength> <iterations> <base64 clear value>  ->  the encoded value
//   DECODE <secret> <cipher> <encoded value>                                                ->  base64 of the clear value, or ERROR <class>
// Fields are separated by tabs. Kafka picks the cipher parameters (IV, or IV
// and GCM tag length) by the decoding broker's configured cipher, hence DECODE's
// <cipher>.
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.io.BufferedReader;
import java.io.InputStreamReader;

import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.security.EncryptingPasswordEncoder;

public class PasswordEncoderCheck {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            try {
                if (f[0].equals("ENCODE")) {
                    String factory = f[3].equals("-") ? null : f[3];
                    EncryptingPasswordEncoder e = new EncryptingPasswordEncoder(new Password(f[1]), factory, f[2],
                        Integer.parseInt(f[4]), Integer.parseInt(f[5]));
                    String clear = new String(Base64.getDecoder().decode(f[6]), StandardCharsets.UTF_8);
                    System.out.println(e.encode(new Password(clear)));
                } else {
                    EncryptingPasswordEncoder e = new EncryptingPasswordEncoder(new Password(f[1]), null,
                        f[2], 128, 4096);
                    String clear = e.decode(f[3]).value();
                    System.out.println(Base64.getEncoder().encodeToString(clear.getBytes(StandardCharsets.UTF_8)));
                }
            } catch (Exception ex) {
                System.out.println("ERROR " + ex.getClass().getSimpleName());
            }
        }
    }
}
