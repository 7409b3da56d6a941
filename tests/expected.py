"""Known answers shared by several test modules."""

# SPEC section 5: bundled Adult, education, target income, rho = 10
SIX_GROUPS = {
    frozenset({"HS-grad", "Some-college"}),
    frozenset({"Assoc-acdm", "Assoc-voc"}),
    frozenset({"Prof-school", "Doctorate"}),
    frozenset({"Bachelors"}),
    frozenset({"Masters"}),
    frozenset({"Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th"}),
}
