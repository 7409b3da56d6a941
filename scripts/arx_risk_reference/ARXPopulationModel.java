package org.deidentifier.arx;
/** Stand-in: only what the risk models read (ARX rounds n / f as here). */
public class ARXPopulationModel implements java.io.Serializable {
    private final long populationSize;
    private ARXPopulationModel(long n) { this.populationSize = n; }
    public static ARXPopulationModel create(int sampleSize, double samplingFraction) {
        return new ARXPopulationModel((long) (Math.round((double) sampleSize / samplingFraction)));
    }
    public static ARXPopulationModel create(long populationSize) { return new ARXPopulationModel(populationSize); }
    public double getPopulationSize() { return populationSize; }
}
