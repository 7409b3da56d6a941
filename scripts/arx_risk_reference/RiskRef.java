// The driver of scripts/arx_risk_reference/run.sh: ARX population uniqueness on a histogram file.
import org.deidentifier.arx.*;
import org.deidentifier.arx.risk.*;
import com.carrotsearch.hppc.IntIntOpenHashMap;
import java.io.*;
import java.util.*;

public class RiskRef {
    // args: histogram file (lines "size count"), then population sizes
    public static void main(String[] a) throws Exception {
        IntIntOpenHashMap h = new IntIntOpenHashMap();
        int n = 0;
        for (String line : java.nio.file.Files.readAllLines(new File(a[0]).toPath())) {
            String[] p = line.trim().split(" ");
            h.put(Integer.parseInt(p[0]), Integer.parseInt(p[1]));
            n += Integer.parseInt(p[0]) * Integer.parseInt(p[1]);
        }
        RiskModelHistogram hist = new RiskModelHistogram(h);
        for (int i = 1; i < a.length; i++) {
            ARXPopulationModel pm = a[i].contains(".") ? ARXPopulationModel.create(n, Double.parseDouble(a[i]))
                                                        : ARXPopulationModel.create(Long.parseLong(a[i]));
            RiskModelPopulationUniqueness u = new RiskModelPopulationUniqueness(pm, hist, ARXSolverConfiguration.create());
            System.out.println(a[i] + " N=" + pm.getPopulationSize() + " zayatz=" + u.getNumUniqueTuplesZayatz()
                + " pitman=" + u.getNumUniqueTuplesPitman() + " snb=" + u.getNumUniqueTuplesSNB()
                + " dankar=" + u.getNumUniqueTuplesDankar() + " model=" + u.getPopulationUniquenessModel());
        }
    }
}
