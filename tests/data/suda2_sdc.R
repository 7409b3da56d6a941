# Calls sdcMicro's SUDA2 C++ entry point (src/Suda2.h, compiled alone into suda2_only.so, see
# make_suda_sdcmicro.py) with the arguments sdcMicro's suda2() gives it, and writes the scores, the
# DIS-SUDA scores, the attribute contributions (percent) and print.suda2()'s band counts.
# Usage: Rscript suda2_sdc.R SO_FILE IN.csv OUT_PREFIX FRACTION
library(Rcpp)
args <- commandArgs(trailingOnly = TRUE)
dyn.load(args[1])
d <- read.csv(args[2], na.strings = "")
fraction <- as.numeric(args[4])
vars <- colnames(d)
x <- d
# as suda2(): one or two key variables get constant dummy columns up to three
while (ncol(x) < 3) x <- cbind(x, rep(1, nrow(x)))
x <- as.matrix(sapply(x, as.numeric))
x[is.na(x)] <- -999
res <- .Call("Suda2", x, -999, ncol(x), fraction, TRUE)$Res
m <- length(vars)
score <- res[, ncol(x) + 1]
dis <- res[, ncol(x) + 2]
share <- res[, seq_len(m), drop = FALSE]
contribution <- 100 * colSums(share * score) / sum(score)
bands <- table(cut(dis, breaks = c(-1, seq(0, 0.7, 0.1) + .Machine$double.eps, Inf)))
write.csv(data.frame(score = score, dis = sprintf("%.17g", dis)), paste0(args[3], ".rows.csv"),
          row.names = FALSE)
write.csv(data.frame(variable = vars, contribution = sprintf("%.17g", contribution)),
          paste0(args[3], ".contrib.csv"), row.names = FALSE)
write.csv(data.frame(count = as.numeric(bands)), paste0(args[3], ".bands.csv"), row.names = FALSE)
