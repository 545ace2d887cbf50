// Kafka's own answers for the TLS principal tests (interop/tls_names_test.go):
// reads lines from standard input and prints one answer line each.
//   DN <file>             the subject of the PEM certificate in file, as
//                         X500Principal.getName() writes it (RFC 2253)
//   MAP <rules> <dn>      SslPrincipalMapper.fromRules(rules).getName(dn),
//                         INVALID for rules Kafka refuses, NOMATCH when no
//                         rule applies
// Fields are separated by tabs.
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import org.apache.kafka.common.security.ssl.SslPrincipalMapper;

public class TLSNames {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            if (f[0].equals("DN")) {
                try (FileInputStream s = new FileInputStream(f[1])) {
                    X509Certificate c = (X509Certificate) cf.generateCertificate(s);
                    System.out.println(c.getSubjectX500Principal().getName());
                }
                continue;
            }
            SslPrincipalMapper m;
            try {
                m = SslPrincipalMapper.fromRules(f[1]);
            } catch (RuntimeException e) {
                System.out.println("INVALID");
                continue;
            }
            try {
                System.out.println(m.getName(f[2]));
            } catch (SslPrincipalMapper.NoMatchingRule e) {
                System.out.println("NOMATCH");
            } catch (Exception e) {
                System.out.println("ERROR");
            }
        }
    }
}
