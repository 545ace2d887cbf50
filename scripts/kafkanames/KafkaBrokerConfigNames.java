// Prints the names of Kafka's broker ConfigDef, one per line, sorted: the
// input of scripts/kafka-broker-config-names.sh, which writes them into
// brokerconf/kafka_names.go. Run on the classpath of the Kafka jars that
// ./interop/install.sh fetches (kafka.server.KafkaConfig.configDef() in
// Kafka 4.x; AbstractKafkaConfig.CONFIG_DEF where that is gone).
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Set;
import java.util.TreeSet;

public class KafkaBrokerConfigNames {
    public static void main(String[] args) throws Exception {
        Object def = null;
        try {
            Class<?> c = Class.forName("kafka.server.KafkaConfig");
            Method m = c.getMethod("configDef");
            def = m.invoke(null);
        } catch (ReflectiveOperationException e) {
            Class<?> c = Class.forName("org.apache.kafka.server.config.AbstractKafkaConfig");
            Field f = c.getField("CONFIG_DEF");
            def = f.get(null);
        }
        @SuppressWarnings("unchecked")
        Set<String> names = (Set<String>) def.getClass().getMethod("names").invoke(def);
        for (String n : new TreeSet<>(names)) System.out.println(n);
    }
}
